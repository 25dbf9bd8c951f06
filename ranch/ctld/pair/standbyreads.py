"""A standby's answers to the listings (issue 47, SlurmctldParameters=standby_read_ms=N): rqueue,
rinfo, `rcontrol show job|node` answered from the follower's copy of the committed state
(ctld/pair/follower.py), each reply stating its `state_age`, so that pollers cost the leader
nothing.

The age stated is never less than the real one: it counts from when the state shown was last
*proven* current (the send time of the etcd read that showed nothing newer), on trio's clock,
to the reply. A copy that cannot be proven within N ms (etcd unreachable, the view not rebuilt
in time) answers nothing: the caller says "not the controller" and the command asks the next
controller, so a reply never claims less staleness than it has.

The view is a whole controller built from the state (the composition root's `build`), restored
and never run: the listings are the leader's own code over the same records. Rebuilt on a read
once the state moved, no sooner than SPACING times the last build took (a big cluster's build
is tens of ms: the standby's loop also campaigns for the seat) unless the view shown is half
way to the bound."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import trio

from ranch.ctld import logs
from ranch.ctld.pair.follower import Follower
from ranch.ctld.rpc.readcache import with_age
from ranch.ctld.rpc.wire import Prebuilt
from ranch.protocol import messages as m

LISTINGS = (m.GetJobs, m.GetSnapshot)
SPACING = 4.0  # a rebuild waits this many times the last one's duration after it

Answer = Callable[[Any], Any]  # a built view: a listing request -> its Prebuilt reply


class StandbyReads:
    """The view of the follower's state, rebuilt as the state moves, and its answers."""

    def __init__(self, follower: Follower, build: Callable[[dict[str, Any]], Answer],
                 bound: float, *, clock: Callable[[], float] = trio.current_time) -> None:
        self.follower = follower
        self.build = build
        self.bound = bound  # seconds: the most a reply may be behind
        self.clock = clock
        self._view: Answer | None = None
        self._version = -1  # the follower's version the view was built from
        self._proven = -math.inf  # its proof when it was built
        self._built_at = -math.inf
        self._cost = 0.0  # seconds the last build took
        self.builds = self.served = self.refused = 0

    def wants(self, msg: Any) -> bool:
        return type(msg) in LISTINGS

    def age(self) -> float:
        """Seconds since the view's state was last proven current (inf: never)."""
        return self.clock() - self.follower.proof_of(self._version, self._proven)

    def _refresh(self, now: float) -> None:
        f = self.follower
        if f.proven_at == -math.inf or self._version == f.version:
            return
        # half the bound gone: rebuild now, so that the build is done before the view shown
        # passes the bound (on a busy host a build takes a good part of it)
        stale = self._view is None or now - self.follower.proof_of(
            self._version, self._proven) > self.bound / 2
        if not stale and now - self._built_at < SPACING * self._cost:
            return  # the view shown still within the bound: spare the loop a rebuild
        version, proven = f.version, f.proven_at
        try:
            view = self.build(f.state())
        except Exception as exc:  # a state the leader's restore refuses: answer none of it
            logs.event("standby view not built; listings go to the leader", logging.WARNING,
                       error=repr(exc))
            self._view, self._version = None, version
            return
        self._view = view
        self._version, self._proven = version, proven
        self._built_at = self.clock()
        self._cost = self._built_at - now
        self.builds += 1

    def answer(self, msg: Any) -> Any:
        """The listing's reply with its age written in, or None when the state shown cannot
        be proven within the bound (the caller answers "not the controller")."""
        self._refresh(self.clock())
        if self._view is None:
            self.refused += 1
            return None
        reply = self._view(msg)
        age = self.age()  # after the build: its time counts
        if age > self.bound or not isinstance(reply, Prebuilt):
            self.refused += 1
            return None
        self.served += 1
        return Prebuilt(reply.type_name, with_age(reply.body, age))
