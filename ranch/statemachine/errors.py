"""InvalidTransition: the one error the state machine raises for a refused event."""

from __future__ import annotations


class InvalidTransition(Exception):
    """An event the table does not allow in the node's state; the message is for an admin."""

    def __init__(self, message: str, *, node: str = "", state: str = "", event: str = "") -> None:
        super().__init__(message)
        self.node = node
        self.state = state  # Slurm's complete string, e.g. "IDLE+DRAIN+INVALID_REG"
        self.event = event  # the table's event kind, e.g. "UNDRAIN"
