"""When it goes wrong: programs that hang or fail across ranks, how to find why, and
how a training state survives: checkpoints that reshard, a crash and its resume. It
may import every floor up to ``parallel``; not ``hardware`` or ``viewer``, beside it
(floors: ``tests/core/test_floors.py``).
"""
