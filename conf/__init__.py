"""conf."""
