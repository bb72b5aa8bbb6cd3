"""Triton if it is installed, whether its kernels are compiled or interpreted, and a
``jit`` that leaves a kernel a plain function when Triton is missing.

Triton is an optional extra (``pip install -e '.[triton]'``, Linux). On a machine
without a GPU its interpreter runs the kernels with NumPy; it must be chosen
(``TRITON_INTERPRET=1``) before Triton is first imported, so the ``snippets`` package
sets it on import when there is no GPU. The interpreter handles fp32 and fp16, not
bf16.
"""

from __future__ import annotations

import os

try:
    import triton
    import triton.language as tl
except ImportError:  # everything that needs it checks HAVE_TRITON
    triton = tl = None

HAVE_TRITON = triton is not None
INTERPRETED = HAVE_TRITON and os.environ.get("TRITON_INTERPRET") == "1"
COMPILED = HAVE_TRITON and not INTERPRETED  # real GPU kernels (needs CUDA tensors)
LOG2E = 1.4426950408889634  # the kernels use exp2: e^x = 2^(x·log2 e)


def jit(fn):
    """``triton.jit``, or the function itself when Triton is not installed."""
    return triton.jit(fn) if HAVE_TRITON else fn
