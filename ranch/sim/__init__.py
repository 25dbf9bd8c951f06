"""A workload replayed through the scheduling core in virtual time (`ranch simulate`)."""
