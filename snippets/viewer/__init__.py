"""The model viewer: a model's graph captured and exported, and the overlays that
show a parallelism's cuts and bytes on it (``view``). It may import every floor up to
``parallel``; not ``hardware`` or ``faults``, beside it
(floors: ``tests/core/test_floors.py``).
"""
