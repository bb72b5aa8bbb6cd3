"""Collectives built from point-to-point, their frames and sweeps."""
