"""Listings answered from a body built at most `read_cache_ms` ago (issue 47): 500 pollers of
rqueue or rinfo cost the controller one build per interval, not one per poll.

A controller pair's standby may answer them instead, from its copy of the state
(SlurmctldParameters=standby_read_ms, ctld/pair/standbyreads.py, with `with_age` below); this
cache spares the leader where there is no pair. Every cached reply states its staleness: the body
carries `state_age`, the seconds since it was built on trio's clock (and `generated_at`, the
wall time it was built, as before); a reply is never older than it says. Off by default
(read_cache_ms=0): Slurm's commands see a job the moment its submission is answered, and so do
Ranch's unless a site trades that for cheaper polls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import trio

from ranch.conf.model import ClusterConfig
from ranch.conf.ratelimit import read_cache_ms
from ranch.ctld.rpc.wire import Prebuilt
from ranch.protocol import messages as m

MAX_BODIES = 64  # field selections are the clients' choice: the cache stays bounded


def cache_key(msg: Any) -> tuple | None:
    """What a request's cached answer is filed under (None: not answered from the cache)."""
    if type(msg) is m.GetJobs and not msg.job_ids:
        return ("jobs", tuple(sorted(msg.fields)) if msg.fields else ())
    if type(msg) is m.GetSnapshot:
        return ("snapshot", bool(msg.metrics), tuple(sorted(msg.fields)))
    return None


def with_age(body: bytes, age: float) -> bytes:
    """`body` (a JSON object) with its staleness written in first."""
    if len(body) < 3:
        return body
    # one copy of the body (a %-format and a slice took two, 0.5 ms at 2,000 jobs)
    return b"".join((b'{"state_age":', orjson.dumps(round(age, 6)), b",",
                     memoryview(body)[1:]))


class ReadCache:
    """The bodies of recent listings, each with the trio time it was built."""

    def __init__(self, config: Callable[[], ClusterConfig]) -> None:
        self.config = config
        self._bodies: dict[tuple, tuple[float, Prebuilt]] = {}
        self._of: ClusterConfig | None = None
        self.interval = 0.0
        self.built = self.served = 0

    def _interval(self) -> float:
        cfg = self.config()
        if cfg is not self._of:
            self._of, self.interval = cfg, read_cache_ms(cfg.settings) / 1000
        return self.interval

    def answer(self, handler: Callable[[Any, Any], Any], conn: Any, msg: Any) -> Any:
        """The route `handler`'s reply to `msg`, from the cache while it is fresh enough."""
        key = cache_key(msg)
        if key is None:  # not a listing (a heartbeat, a submission): no config asked
            return handler(conn, msg)
        interval = self._interval()
        if interval <= 0:
            return handler(conn, msg)
        now = trio.current_time()
        hit = self._bodies.get(key)
        if hit is not None and now - hit[0] < interval:
            self.served += 1
            return Prebuilt(hit[1].type_name, with_age(hit[1].body, now - hit[0]))
        reply = handler(conn, msg)
        if not isinstance(reply, Prebuilt):  # an Error: never kept
            return reply
        if len(self._bodies) >= MAX_BODIES and key not in self._bodies:
            self._bodies.clear()
        self._bodies[key] = (now, reply)
        self.built += 1
        return Prebuilt(reply.type_name, with_age(reply.body, 0.0))
