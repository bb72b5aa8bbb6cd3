"""Sharded data parallelism: ZeRO 1-3 and mixed precision."""
