"""statemachine."""
