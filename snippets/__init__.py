"""Commonplace snippets: one concept a module, each runnable alone and checked
against torch.

See ``python -m snippets list``.
"""

import os

import torch

if not torch.cuda.is_available():
    # No GPU to compile Triton kernels for: its interpreter is the only way to run
    # them, and it must be chosen before Triton is first imported (torch may do that
    # early).
    os.environ.setdefault("TRITON_INTERPRET", "1")
