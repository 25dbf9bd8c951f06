"""Open-file limits and loopback source addresses: what caps the nodes one host simulates."""

from __future__ import annotations

import resource

# Linux hands out ~28k ephemeral ports per (source address, destination) pair; past this many
# connections the simulator spreads its sockets over several loopback source addresses.
PORTS_PER_SOURCE = 25_000
# Descriptors a process needs besides its node connections (stdio, epoll, listeners, files).
FD_HEADROOM = 100


def fds_for(nodes: int) -> int:
    """Descriptors rctld wants for `nodes` connections: one each, its reserve (a sixteenth of
    the limit; ctld/rpc/admission.py) and room for commands."""
    return nodes + nodes // 8 + 1024


def raise_nofile(want: int = 0) -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit, and both to `want` where allowed (root,
    up to fs.nr_open: the child rctld inherits them); returns (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and want > hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            soft, hard = want, want
        except (ValueError, OSError):  # not root, or over nr_open: the hard limit it is
            pass
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def max_nodes_for_fds(soft_limit: int) -> int:
    """How many node connections fit in `soft_limit` descriptors (one each, plus headroom)."""
    return max(0, soft_limit - FD_HEADROOM)


def source_addresses(nodes: int, count: int | None = None) -> list[str]:
    """Loopback source addresses for `nodes` connections: 127.0.0.1 alone while the ports of
    one address suffice, then 127.0.1.1, 127.0.1.2, ... (always inside 127.0.0.0/8). `count`
    forces how many (tests use it to exercise the multi-address path with a small fleet)."""
    if count is None:
        count = max(1, -(-nodes // PORTS_PER_SOURCE))
    if count == 1:
        return ["127.0.0.1"]
    if count > 250:
        raise ValueError(f"{nodes} nodes need {count} loopback source addresses; 250 at most")
    return [f"127.0.1.{i}" for i in range(1, count + 1)]
