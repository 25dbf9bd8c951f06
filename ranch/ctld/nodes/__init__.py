"""The node registry and its components: states, liveness, guards, membership, power, windows."""
