"""viewer."""
