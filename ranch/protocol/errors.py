"""ProtocolError: a refused frame or body, with the stable code that `messages.Error` carries."""

from __future__ import annotations

from ranch.protocol.messages import Error

# Error code of a registration refused because rctld has no place for the connection (its
# descriptor cap): the node registers again within BUSY_RETRY seconds (jittered), and rctld
# counts it heard that far ahead, so the controller's own limit never makes it NOT_RESPONDING.
BUSY = "busy"
BUSY_RETRY = 5.0


class ProtocolError(Exception):
    """A frame or message the peer sent was refused.

    `code` is one of Error's stable words; `request_id`/`version` are set when the header was
    readable, so that the peer can match the reply to its request."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str = "",
        request_id: int = 0,
        version: int | None = None,
        fatal: bool = False,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.field = field
        self.request_id = request_id
        self.version = version
        self.fatal = fatal  # the byte stream is out of sync: reply if you can, then close

    def to_error(self) -> Error:
        return Error(code=self.code, message=self.message, field=self.field)
