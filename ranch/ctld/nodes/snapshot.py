"""What rinfo, rcontrol show node and the web page read: the node snapshot, cached per change
generation, and its encoded bodies, cached per field selection."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ranch.ctld.kept import kept
from ranch.ctld.nodes.node import heartbeat_fields, metrics_record, snapshot_record
from ranch.ctld.state.changelog import ChangeLog
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from ranch.ctld.nodes.ports import Shown

# Encoded snapshot bodies kept, one per (metrics, field selection) that clients asked for.
SNAPSHOT_BODY_CACHE = 16
# Seconds a snapshot may lag heartbeat-only data (never a state change): the plain one (rinfo,
# rcontrol show node: load and free memory, which Slurm refreshes only per ping) and the metrics
# one (rinfo --metrics).
SNAPSHOT_STALENESS = {False: 5.0, True: 1.0}
# Seconds without a snapshot asked for, after which the cached snapshot, its encoded bodies and
# every node's record are let go: about 1.3 KB a node and the 3-8 MB bodies (issue 47), held
# until then for nobody. The next request after such a spell builds the records again on the
# event loop (150-400 ms at 10,000 nodes on a loaded 2-core box, once): ten minutes, so that
# an admin's occasional rinfo rarely pays it; pollers (the page, exporters) keep them. The
# 150 MB goal holds with the caches kept (114-118 MB), so this is a saving, not the goal.
CACHE_IDLE = 600.0
EXPIRY_KEY = ("", "snapshot-cache")  # its key in the controller's deadlines


class Timer(Protocol):
    """The controller's deadlines (ctld/deadlines.py), as the views use them."""

    def schedule(self, key: Hashable, when: float) -> None: ...
    def __contains__(self, key: Hashable) -> bool: ...


class Snapshots:
    def __init__(self, shown: Shown, *, changes: ChangeLog, clock: Callable[[], float],
                 wall: Callable[[], float], timer: Timer | None = None) -> None:
        """`changes`: its generations say when the cached snapshot is out of date; `timer`
        wakes `expire` with EXPIRY_KEY (None: the caches are kept)."""
        self.shown = shown
        self.changes = changes
        self.clock = clock
        self.wall = wall
        self.timer = timer
        self.asked = -math.inf  # when a snapshot was last asked for (clock)
        self._snaps: dict[bool, tuple[int, int, float, m.Snapshot]] = {}
        self._bodies: dict[tuple[bool, tuple[str, ...]], tuple[m.Snapshot, bytes]] = {}

    def snapshot(self, metrics: bool = False) -> m.Snapshot:
        """Cached per change generation: a state change shows at once; heartbeat-only figures
        (load, free memory, metrics) may lag by SNAPSHOT_STALENESS."""
        c, changes = self.shown, self.changes
        now = self.asked = self.clock()
        timer = self.timer
        if timer is not None and EXPIRY_KEY not in timer:
            timer.schedule(EXPIRY_KEY, now + CACHE_IDLE)
        cached = self._snaps.get(metrics)
        if cached is not None:
            gen, soft, built, snap = cached
            if gen == changes.gen and (
                soft == changes.soft_gen or now - built < SNAPSHOT_STALENESS[metrics]
            ):
                return snap
        wall = self.wall()
        records = []
        for node in c.nodes.values():
            rec = node.record
            if rec is None:
                rec = node.record = snapshot_record(node)
                node.view_fresh = True
            elif not node.view_fresh:
                # Only heartbeat figures changed: patch the cached record in place. A copy per
                # node cost 2 KB each (20 MB at 10,000 nodes); the snapshot it also belongs to
                # is the one being replaced, and its encoded body is already cached.
                rec.update(heartbeat_fields(node))
                node.view_fresh = True
            if metrics:
                rec = {**rec, "metrics": metrics_record(node, wall)}
            records.append(rec)
        snap = m.Snapshot(
            cluster_name=c.config.cluster_name,
            generated_at=wall,
            nodes=tuple(records),
            partitions=c.partition_records,
        )
        old = cached[3] if cached is not None else None
        self._snaps[metrics] = (changes.gen, changes.soft_gen, now, snap)
        # the bodies of the snapshot just replaced can never be served again: at 10,000 nodes
        # they held 8 MB (and the old records) until a client asked for the same fields
        for key in [k for k, (of, _) in self._bodies.items() if of is old]:
            del self._bodies[key]
        return snap

    def expire(self, now: float) -> bool:
        """Let the caches go if no snapshot was asked for in CACHE_IDLE (True), else wake again
        CACHE_IDLE after the last request."""
        if now - self.asked < CACHE_IDLE:
            if self.timer is not None:
                self.timer.schedule(EXPIRY_KEY, self.asked + CACHE_IDLE)
            return False
        self._snaps.clear()
        self._bodies.clear()
        for node in self.shown.nodes.values():
            node.record = None
            node.view_fresh = False
        return True

    def body(self, metrics: bool = False, fields: tuple[str, ...] = ()) -> bytes:
        """The cached snapshot's encoded body (orjson of the same shape ranch.protocol.codec
        writes),
        encoded once per snapshot and field selection rather than once per request.

        `fields` keeps only those keys of each node record (GetSnapshot.fields): rinfo's default
        view needs a fifth of the full 5 MB at 10,000 nodes."""
        snap = self.snapshot(metrics)
        wanted = tuple(sorted(set(fields)))
        cache_key = (metrics, wanted)
        cached = self._bodies.get(cache_key)
        if cached is not None and cached[0] is snap:
            return cached[1]
        nodes: Sequence[dict[str, Any]] = snap.nodes
        if wanted:
            nodes = [{k: rec[k] for k in wanted if k in rec} for rec in nodes]
        body = kept(orjson.dumps({
            "cluster_name": snap.cluster_name,
            "generated_at": snap.generated_at,
            "nodes": nodes,
            "partitions": snap.partitions,
        }))
        if len(self._bodies) >= SNAPSHOT_BODY_CACHE and cache_key not in self._bodies:
            self._bodies.clear()  # clients pick the field lists: keep the cache bounded
        self._bodies[cache_key] = (snap, body)
        return body
