"""noded."""
