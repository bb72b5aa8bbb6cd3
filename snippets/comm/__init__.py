"""comm."""
