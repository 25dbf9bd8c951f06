"""NodeOptions: what rnoded's command line gives the node daemon."""

from __future__ import annotations

import attrs

from ranch.protocol.versions import CURRENT

SHUTDOWN_GRACE = 2.0  # how long SIGTERM waits for the controller's Ack


@attrs.define
class NodeOptions:
    server: tuple[str, int]  # the first controller to try
    name: str
    key: bytes
    spool_dir: str
    protocol_version: int = CURRENT
    connect_timeout: float = 5.0
    shutdown_grace: float = SHUTDOWN_GRACE
    dynamic: bool = False  # not in the config: join with the hardware (rnoded --dynamic)
    dynamic_conf: str = ""  # extra NodeName keys of a dynamic node (--conf)
    boot_time: float | None = None  # -b: this daemon's start, as if the node just booted
    # every controller, in the order to try them (--server h1:6817,h2:6817; issue 32); empty:
    # `server` alone
    servers: tuple[tuple[str, int], ...] = ()
