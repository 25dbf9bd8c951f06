"""systemd's readiness protocol (sd_notify): one datagram to $NOTIFY_SOCKET; no library for that."""

from __future__ import annotations

import os
import socket
import time


class Notifier:
    """Tells the service manager READY=1, RELOADING=1, STOPPING=1, STATUS=...; does nothing
    when not started by one (no NOTIFY_SOCKET). A failed send never stops the daemon."""

    def __init__(self, address: str | None = None) -> None:
        addr = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
        if addr.startswith("@"):  # an abstract socket (systemd's own are named files)
            addr = "\0" + addr[1:]
        self.address = addr

    def send(self, *lines: str) -> bool:
        if not self.address:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto("\n".join(lines).encode(), self.address)
        except OSError:
            return False
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}", f"MAINPID={os.getpid()}")

    def reloading(self) -> bool:
        # systemd 253+ wants MONOTONIC_USEC with RELOADING=1 (Type=notify-reload); older ones
        # ignore the field.
        usec = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1_000_000)
        return self.send("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

