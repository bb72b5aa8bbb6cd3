"""Tensor, sequence and vocabulary parallelism."""
