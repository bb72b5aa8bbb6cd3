"""The model and its layers: the tiny GPT every strategy builds, the mixture of
experts it can use, and activation recomputation. It may import ``core`` and the
formulas of ``sizing``; never a strategy (floors: ``tests/core/test_floors.py``).
"""
