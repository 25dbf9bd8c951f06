"""Ports for test daemons, each worker of a two-worker run from its own range below the kernel's
ephemeral ports: a port found free by binding to 0 was one the kernel could hand the other
worker's next connection or daemon before ours bound it (a real slurmd failed on that)."""

from __future__ import annotations

import os
import random
import socket

LOW, HIGH = 12000, 32000  # below ip_local_port_range's default 32768


def _range() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... under xdist
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    span = (HIGH - LOW) // max(1, count)
    return range(LOW + index * span, LOW + (index + 1) * span)


_ports = _range()
_next = random.randrange(len(_ports))  # another run's ports may still be in TIME_WAIT


def free_port() -> int:
    """A port of this worker's range that binds now and was not handed out before here."""
    global _next
    for _ in range(len(_ports)):
        port = _ports[_next % len(_ports)]
        _next += 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {_ports}")
