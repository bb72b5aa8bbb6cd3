"""Attention kernels: online softmax, FlashAttention (PyTorch, Triton), ring
attention and its layouts. It may import ``core``, ``sizing`` and ``models``; not
``comm``, beside it (floors: ``tests/core/test_floors.py``).
"""
