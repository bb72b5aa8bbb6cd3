"""Commonplace snippets: one concept a module, each runnable alone and checked against torch.

See ``python -m snippets list``.
"""
