"""Context parallelism: the sequence split over ranks."""
