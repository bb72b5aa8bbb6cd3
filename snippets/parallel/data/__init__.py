"""Data parallelism: DDP by hand, its buckets and timeline."""
