"""Which connections rctld takes: caps in all, per source address and before the key is proven.

The caps follow from the descriptor limit (RLIMIT_NOFILE, read at start; docs/limits.md):
  - RESERVE descriptors (at least FD_RESERVE, a sixteenth of the limit) are never used for
    connections: state saves, the job journal, the event log, program pipes, HTTP clients;
  - connections in all: the limit less that reserve;
  - unproven connections (no frame from them has passed its MAC yet): a quarter of those, at
    most UNPROVEN_CEILING, so nodes and admins always keep three quarters;
  - unproven connections from one source address: a quarter of the unproven ones.
A connection over the cap in all or per source is accepted and closed at once. When the
unproven pool is full, the oldest unproven connection is dropped to make room: it has had the
longest to prove itself (a real peer needs milliseconds), so a flood of connections that never
prove anything cannot keep a node or a command out. Among the oldest EVICT_SCAN, one with no
request waiting unread in the kernel goes first: a real peer sends its whole first frame at
once, so when rctld is short of CPU its request may be waiting there, while a slow peer's
trickle has been read. Refusals and drops are logged at most once
per kind every LOG_INTERVAL seconds, with the count of those not logged.
"""

from __future__ import annotations

import itertools
import logging
import resource
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

import attrs
import trio

from ctld import logs

FD_RESERVE = 64
UNPROVEN_CEILING = 1024
LOG_INTERVAL = 10.0
EVICT_SCAN = 16
WAITING_REQUEST = 64  # unread bytes that may be a whole first frame (the shortest is ~70)


@attrs.frozen
class Caps:
    fd_limit: int
    connections: int  # open connections in all
    unproven: int  # connections that have not yet proven the key
    per_source: int  # unproven connections from one source address


def caps_for(fd_limit: int) -> Caps:
    reserve = max(FD_RESERVE, fd_limit // 16)
    connections = max(16, fd_limit - reserve)
    unproven = max(8, min(UNPROVEN_CEILING, connections // 4))
    return Caps(fd_limit, connections, unproven, max(4, unproven // 4))


def fd_limit() -> int:
    """The soft RLIMIT_NOFILE (unlimited counts as 2**20)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def raise_fd_limit() -> int:
    """Raise the soft descriptor limit to the hard one, as slurmctld does; returns the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # a hard limit the kernel will not grant (nr_open)
            pass
    return fd_limit()


class Closable(Protocol):
    def close_soon(self) -> None: ...

    def unread(self) -> int:
        """Bytes the peer sent that are still waiting in the kernel."""
        ...


class QuietLog:
    """At most one line per kind every `interval` seconds; the next one says how many were
    held back, so that a flood of refusals cannot flood the log."""

    def __init__(self, interval: float = LOG_INTERVAL,
                 clock: Callable[[], float] = trio.current_time) -> None:
        self.interval = interval
        self.clock = clock
        self._last: dict[str, float] = {}
        self._held: Counter[str] = Counter()

    def event(self, kind: str, msg: str, level: int = logging.WARNING, **fields: Any) -> None:
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._held[kind] += 1
            return
        self._last[kind] = now
        held = self._held.pop(kind, 0)
        if held:
            fields["not_logged"] = f"{held} more in the last {now - last:.0f} s"
        logs.event(msg, level, **fields)


class Admission:
    """Counts of open connections; says which new one to refuse and which old one to drop."""

    def __init__(self, caps: Caps, clock: Callable[[], float] = trio.current_time) -> None:
        self.caps = caps
        self.clock = clock
        self.open = 0
        # unproven connections, oldest first: conn -> (source address, accepted at)
        self._unproven: dict[Closable, tuple[str, float]] = {}
        self._by_source: Counter[str] = Counter()
        self.log = QuietLog(clock=clock)
        self.refused = 0
        self.evicted = 0

    @property
    def unproven(self) -> int:
        return len(self._unproven)

    def refuses(self, source: str, peer: str) -> bool:
        """Whether a new connection from `source` is over the cap in all or per source (the
        caller closes it at once); the refusal is logged, quietly."""
        caps = self.caps
        if self.open >= caps.connections:
            return self._refuse("connections", peer, f"{self.open} connections open; the cap "
                                f"is {caps.connections} (descriptor limit {caps.fd_limit})")
        if self._by_source[source] >= caps.per_source:
            return self._refuse("per_source", peer, f"{self._by_source[source]} connections "
                                f"from {source} have not proven the key; the cap per source "
                                f"is {caps.per_source}")
        return False

    def add(self, conn: Closable, source: str) -> None:
        """Count `conn` in (after `refuses` said no), unproven; when the unproven pool is full,
        its oldest connection is dropped to make room."""
        caps = self.caps
        if len(self._unproven) >= caps.unproven:
            oldest, (old_source, since) = self._victim()
            waited = self.clock() - since
            self._forget(oldest)
            oldest.close_soon()
            self.evicted += 1
            self.log.event("evicted", "dropped the oldest connection that had not proven the "
                           "key, to make room", source=old_source, waited=f"{waited:.1f}s",
                           cap=caps.unproven)
        self.open += 1
        self._unproven[conn] = (source, self.clock())
        self._by_source[source] += 1

    def _victim(self) -> tuple[Closable, tuple[str, float]]:
        """The oldest unproven connection with no request waiting unread, among the oldest
        EVICT_SCAN; the oldest of all when each of those has one."""
        oldest = next(iter(self._unproven.items()))
        for item in itertools.islice(self._unproven.items(), EVICT_SCAN):
            if item[0].unread() < WAITING_REQUEST:
                return item
        return oldest

    def proven(self, conn: Closable) -> None:
        """`conn` showed it holds the key: it no longer counts against the unproven caps."""
        self._forget(conn)

    def gone(self, conn: Closable) -> None:
        self._forget(conn)
        self.open -= 1

    def _forget(self, conn: Closable) -> None:
        entry = self._unproven.pop(conn, None)
        if entry is not None:
            source = entry[0]
            self._by_source[source] -= 1
            if self._by_source[source] <= 0:
                del self._by_source[source]

    def _refuse(self, kind: str, peer: str, why: str) -> bool:
        self.refused += 1
        self.log.event(f"refused:{kind}", "connection refused", peer=peer, why=why)
        return True


def source_of(peer: str) -> str:
    """The address part of "ADDR:PORT" (IPv6 addresses keep their colons)."""
    addr, sep, port = peer.rpartition(":")
    return addr if sep and port.isdigit() else peer

