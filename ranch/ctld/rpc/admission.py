"""Which connections rctld takes: caps in all, per source address and before the key is proven.

The caps follow from the descriptor limit (RLIMIT_NOFILE, read at start; docs/limits.md):
  - RESERVE descriptors (at least FD_RESERVE, a sixteenth of the limit) are never used for
    connections: state saves, the job journal, the event log, program pipes, HTTP clients;
  - connections in all: the limit less that reserve;
  - unproven connections (no frame from them has passed its MAC yet): room for every
    configured node to connect at once, twice over (at least UNPROVEN_FLOOR), within what the
    proven connections leave of the cap in all;
  - unproven connections from one source address, while that pool is full: a quarter of it.
A newcomer is taken while there is room. When there is none, it takes the place of the oldest
*idle* unproven connection: one at least IDLE_AFTER seconds old with no request waiting unread
in the kernel (fewer than READY bytes: a real peer sends its whole first frame at once and
proves the key as soon as rctld reads it, while a slow peer's trickle has been read and a
silent one has sent nothing), among the oldest EVICT_SCAN. A newcomer whose own request is
waiting may also take the place of a younger one without. A newcomer that gets no place, or
has no request waiting while its source holds a quarter of the full pool, is accepted and
closed at once. So nodes and commands always get in, and a flood of connections that never
prove anything cannot keep them out. While no unproven connection is idle (a storm of nodes
registering at once, waiting for rctld to read them, or a burst of new connections), rctld
accepts nothing more until one goes or falls idle: the rest wait in the kernel's queue rather
than being refused. Refusals and drops are logged at most once per kind every LOG_INTERVAL
seconds, with the count of those not logged.
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

from ranch.ctld import logs

FD_RESERVE = 64
COMMAND_ROOM = 16  # places under the cap in all left for commands when counting nodes
UNPROVEN_FLOOR = 1024
LOG_INTERVAL = 10.0
EVICT_SCAN = 16
IDLE_AFTER = 0.25  # seconds: younger, a peer may not have sent its request yet
READY = 64  # unread bytes that may be a whole first frame (the shortest is about 70)
MAX_CLOSING = 32  # dropped connections whose descriptors are not closed yet


@attrs.frozen
class Caps:
    fd_limit: int
    connections: int  # open connections in all
    unproven: int  # connections that have not yet proven the key (when few are proven)

    def nodes_allowed(self) -> int:
        """How many nodes can hold a connection at once, leaving commands a few places."""
        return max(0, self.connections - COMMAND_ROOM)


def caps_for(fd_limit: int, nodes: int = 0) -> Caps:
    """The caps for a descriptor limit and a cluster of `nodes` configured nodes: a storm of
    all of them registering at once fits in the unproven pool, so none is dropped for being
    slow to send its Register while thousands wait to be read."""
    reserve = max(FD_RESERVE, fd_limit // 16)
    connections = max(16, fd_limit - reserve)
    return Caps(fd_limit, connections, max(UNPROVEN_FLOOR, 2 * nodes))


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


class Unread(Protocol):
    def unread(self) -> int:
        """Bytes the peer sent that are still waiting in the kernel."""
        ...


class Closable(Protocol):
    def close_soon(self) -> None: ...

    @property
    def io(self) -> Unread: ...


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
        if held and last is not None:
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
        self._freed: trio.Event | None = None  # set when the unproven pool loses a member
        self._closing: set[Closable] = set()  # dropped, their tasks not yet through
        self.log = QuietLog(clock=clock)
        self.refused = 0
        self.evicted = 0

    @property
    def unproven(self) -> int:
        return len(self._unproven)

    def pool_cap(self) -> int:
        """Unproven connections allowed now: what the proven ones leave of the cap in all,
        at most caps.unproven."""
        proven = self.open - len(self._unproven)
        return max(1, min(self.caps.unproven, self.caps.connections - proven))

    def has_room(self) -> bool:
        """Whether a newcomer may be taken now: there is room, or an idle unproven connection
        to drop for it (checked before accepting: otherwise the newcomers had better wait in
        the kernel's queue than be refused)."""
        if self.open < self.caps.connections and len(self._unproven) < self.pool_cap():
            return True
        return len(self._closing) < MAX_CLOSING and self._victim(False) is not None

    def at_capacity(self) -> bool:
        """Whether every place is held by a peer that proved the key: none will free until one
        leaves, so a newcomer is told so (ctld/rpc/capacity.py) rather than left waiting."""
        return self.open >= self.caps.connections and not self._unproven

    def nodes_full(self) -> bool:
        """Whether peers that proved the key hold every place nodes may take: the rest are kept
        for commands (ctld/rpc/capacity.py)."""
        return self.open - len(self._unproven) >= self.caps.nodes_allowed()

    def nodes_over(self) -> bool:
        """Whether peers that proved the key hold more places than nodes may take (nodes let
        in unproven during a storm, before they were known to be nodes)."""
        return self.open - len(self._unproven) > self.caps.nodes_allowed()

    async def wait_room(self, timeout: float) -> None:
        """Until an unproven connection goes, or `timeout` (one may fall idle meanwhile)."""
        if self._freed is None:
            self._freed = trio.Event()
        with trio.move_on_after(timeout):
            await self._freed.wait()

    def refuses(self, source: str, peer: str, ready: bool) -> bool:
        """Whether to close a newcomer from `source` at once (`ready`: its request is waiting
        unread). When it takes the place of an unproven connection, that one is dropped here.
        Refusals and drops are logged, quietly."""
        cap = self.pool_cap()
        if self.open < self.caps.connections and len(self._unproven) < cap:
            return False
        share = max(4, cap // 4)
        if not ready and self._by_source[source] >= share:
            return self._refuse("per_source", peer, f"{self._by_source[source]} connections "
                                f"from {source} have not proven the key; the cap per source "
                                f"is {share} while {len(self._unproven)} wait")
        # Dropped connections hold their descriptors until their tasks run: a newcomer taking
        # one's place goes over the cap in all by as many, at most MAX_CLOSING (the reserve
        # covers them).
        victim = self._victim(ready) if len(self._closing) < MAX_CLOSING else None
        if victim is None:
            return self._refuse("full", peer, f"{self.open} connections open (cap "
                                f"{self.caps.connections}, descriptor limit "
                                f"{self.caps.fd_limit}), {len(self._unproven)} of them unproven "
                                f"and none of those idle for {IDLE_AFTER:g} s")
        conn, (old_source, since) = victim
        self._forget(conn)
        self._closing.add(conn)  # still open until its task runs: counted in `open` till then
        conn.close_soon()
        self.evicted += 1
        self.log.event("evicted", "dropped the oldest connection that had not proven the key, "
                       "to make room", source=old_source, waited=f"{self.clock() - since:.1f}s",
                       cap=cap)
        return False

    def add(self, conn: Closable, source: str) -> None:
        """Count `conn` in, unproven (after `refuses` said no)."""
        self.open += 1
        self._unproven[conn] = (source, self.clock())
        self._by_source[source] += 1

    def _victim(self, ready: bool) -> tuple[Closable, tuple[str, float]] | None:
        """The member a newcomer replaces, among the oldest EVICT_SCAN: the oldest idle one;
        for a newcomer whose request is waiting, else the oldest without one."""
        young = self.clock() - IDLE_AFTER
        fallback = None
        for item in itertools.islice(self._unproven.items(), EVICT_SCAN):
            if item[0].io.unread() >= READY:
                continue
            if item[1][1] <= young:
                return item
            if ready and fallback is None:
                fallback = item
        return fallback

    def proven(self, conn: Closable) -> None:
        """`conn` showed it holds the key: it no longer counts against the unproven caps."""
        self._forget(conn)

    def gone(self, conn: Closable) -> None:
        self._forget(conn)
        self.open -= 1
        if conn in self._closing:
            self._closing.discard(conn)
            self._wake()

    def _forget(self, conn: Closable) -> None:
        entry = self._unproven.pop(conn, None)
        if entry is not None:
            source = entry[0]
            self._by_source[source] -= 1
            if self._by_source[source] <= 0:
                del self._by_source[source]
            self._wake()

    def _wake(self) -> None:
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    def _refuse(self, kind: str, peer: str, why: str) -> bool:
        self.refused += 1
        self.log.event(f"refused:{kind}", "connection refused", peer=peer, why=why)
        return True


def source_of(peer: str) -> str:
    """The address part of "ADDR:PORT" (IPv6 addresses keep their colons)."""
    addr, sep, port = peer.rpartition(":")
    return addr if sep and port.isdigit() else peer

