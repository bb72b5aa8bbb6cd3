"""Mixture of experts: the routed layer, and its experts split over ranks."""
