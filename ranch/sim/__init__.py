"""Replay of a workload through the pure scheduling core in virtual time (issue 44's `ranch simulate`)."""
