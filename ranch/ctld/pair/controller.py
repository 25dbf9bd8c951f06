"""rctld with StateStore=etcd: stand by (answering "not the controller"), campaign for the seat,
serve once it is won (the state read from etcd), stop acting the moment it is lost, stand by
again. SIGTERM gives the seat up (the lease revoked, so a standby takes over at once)."""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio

from ranch.conf.model import ClusterConfig
from ranch.conf.ratelimit import standby_read_ms
from ranch.ctld import logs
from ranch.ctld.pair import standby
from ranch.ctld.pair.election import Election
from ranch.ctld.pair.follower import Follower, poll_interval
from ranch.ctld.pair.standbyreads import Answer, StandbyReads
from ranch.ctld.state.etcdclient import EtcdClient, EtcdError
from ranch.ctld.state.etcdstore import EtcdStore

RESIGN_TIMEOUT = 2.0
TAKEOVER_HOLD_OFF = 3.0  # seconds a controller that handed over stays out of the campaign
# A new leader judges no node's silence for this many lease TTLs: the nodes are still finding
# it (they try each SlurmctldHost, then back off a few seconds), and the takeover is not theirs.
GRACE_TTLS = 3


class Controller:
    """One controller of a pair: its election, and the daemon it runs while it leads.
    `make_daemon(store, grace, handover)` builds the Daemon (ctld/main.py, the composition root);
    `make_view(state)` the read-only view a standby answers listings from with
    SlurmctldParameters=standby_read_ms (ctld/compose/standbyview.py; None: it answers none)."""

    def __init__(self, config: ClusterConfig, key: bytes, *, name: str, host: str, port: int,
                 state_dir: str,
                 make_daemon: Callable[[EtcdStore, float, Callable[[], Awaitable[None]]], Any],
                 version: str = "",
                 make_view: Callable[[dict[str, Any]], Answer] | None = None) -> None:
        c = config.control
        self.config = config
        self.key = key
        self.host, self.port = host, port
        self.state_dir = state_dir
        self.make_daemon = make_daemon
        self.make_view = make_view
        self.version = version
        self.reads: StandbyReads | None = None  # while standing by with standby_read_ms
        timeout = max(0.5, c.etcd_lease_ttl / 3)
        self.election = Election(EtcdClient(c.etcd_endpoints, timeout), c.etcd_prefix, name,
                                 c.etcd_lease_ttl)
        self.store_client = EtcdClient(c.etcd_endpoints, timeout)
        self.daemon: Any = None
        self.reigns = 0
        self._stop = False
        self._scope: trio.CancelScope | None = None

    async def run(self, *, signals: bool = True,
                  task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as outer:
            self._scope = outer.cancel_scope
            if signals:
                outer.start_soon(self._signals)
            task_status.started()
            try:
                while not self._stop:
                    await self._stand_by()
                    await self._lead()
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(RESIGN_TIMEOUT):
                    await self.election.resign()
                await self.election.client.aclose()
                await self.store_client.aclose()
            outer.cancel_scope.cancel()

    async def _stand_by(self) -> None:
        c = self.config.control
        bound = standby_read_ms(self.config.settings) / 1000
        client = EtcdClient(c.etcd_endpoints, max(0.5, c.etcd_lease_ttl / 3))
        self.reads = None
        if bound > 0 and self.make_view is not None:
            follower = Follower(client, c.etcd_prefix, interval=poll_interval(bound))
            self.reads = StandbyReads(follower, self.make_view, bound)
        try:
            async with trio.open_nursery() as nursery:
                if self.reads is not None:
                    nursery.start_soon(self.reads.follower.run)
                try:
                    await nursery.start(partial(
                        standby.serve, self.host, self.port, self.key,
                        lambda: self.election.leader, self.config.cluster_name, self.version,
                        self.config.access, reads=self.reads, config=self.config))
                except OSError as exc:  # the port is still ours from the reign that just ended
                    logs.event("standby cannot listen yet", logging.WARNING, error=str(exc))
                await self.election.campaign()
                nursery.cancel_scope.cancel()
        finally:
            self.reads = None
            await client.aclose()

    async def _lead(self) -> None:
        e = self.election
        store = EtcdStore(self.store_client, e.prefix, e.key, e.epoch, self.state_dir,
                          on_fenced=e.fenced, alive=e.alive)
        try:
            await store.fetch()
        except (EtcdError, ValueError, KeyError, TypeError) as exc:  # unreadable: refused
            logs.event("state not read from etcd; giving the seat up", logging.ERROR,
                       error=str(exc))
            await e.resign(hold_off=TAKEOVER_HOLD_OFF)
            return
        self.reigns += 1
        # `rcontrol takeover`: the seat handed over (a standby wins it at its next look)
        handover = partial(e.resign, hold_off=TAKEOVER_HOLD_OFF)
        self.daemon = daemon = self.make_daemon(store, GRACE_TTLS * e.ttl, handover)
        logs.event("serving as the controller", epoch=e.epoch, name=e.name)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(e.keep)
            nursery.start_soon(self._run_daemon, daemon, nursery.cancel_scope)
            await e.lost.wait()
            nursery.cancel_scope.cancel()
        self.daemon = None

    async def _run_daemon(self, daemon: Any, scope: trio.CancelScope) -> None:
        try:
            await daemon.run()
        finally:
            # the daemon stopped by itself (an error, or stop()): the seat goes with it
            self.election.fenced()
            scope.cancel()

    def stop(self) -> None:
        self._stop = True
        self.election.fenced()
        if self._scope is not None:
            self._scope.cancel()

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as sigs:
            async for sig in sigs:
                if sig == signal.SIGHUP:
                    if self.daemon is not None:
                        await self.daemon.reconfigure("SIGHUP")
                    continue
                logs.event("shutting down", signal=signal.Signals(sig).name)
                self.stop()
                return
