"""Where this controller lives: what power programs are told and `rcontrol show config` shows."""

from __future__ import annotations


class Site:
    """The controller's state directory, key file and log file, and once it listens, its
    address (RANCH_SERVER for an example ResumeProgram that starts an rnoded joining it)."""

    def __init__(self, state_dir: str | None = None, key_file: str | None = None,
                 log_file: str | None = None) -> None:
        self.state_dir = state_dir  # where resume files go; None: in-process tests
        self.key_file = key_file
        self.log_file = log_file  # "": stderr; None: not said
        self._server_addr: str | None = None

    @property
    def server_addr(self) -> str | None:
        return self._server_addr

    def listening(self, addr: str) -> None:
        """The RPC listener is up at `addr` (known only then: port 0 picks one)."""
        self._server_addr = addr
