"""The running controller: one nursery of its loops; SIGTERM cancels it after a last state save."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, cast

import attrs
import trio

from ranch.assoc import serial
from ranch.conf.model import ClusterConfig
from ranch.ctld import logs, reconfig
from ranch.ctld.compose import assemble
from ranch.ctld.compose.controller import Controller
from ranch.ctld.compose.layers import node_admin, nodes_shown, rpc_server
from ranch.ctld.jobs import acct
from ranch.ctld.jobs.history import FileHistory
from ranch.ctld.jobs.replicatedhistory import ReplicatedHistory
from ranch.ctld.rpc import nodecredentials
from ranch.ctld.rpc.server import Server
from ranch.ctld.runner import Runner
from ranch.ctld.signals import handle_signals
from ranch.ctld.site import Site
from ranch.ctld.state import bulkfiles, statefile
from ranch.ctld.state.changelog import ChangeLog
from ranch.ctld.state.durability import Durability
from ranch.ctld.state.historyfiles import DIR_NAME
from ranch.ctld.state.overlay import overlay
from ranch.ctld.state.saving import Saver
from ranch.ctld.state.store import FileStore, Store
from ranch.ctld.wakeup import Wakeup
from ranch.ctld.web.webports import (
    Health,
    ReservationBook,
    WebAdmin,
    WebEvents,
    WebJobs,
    WebNodes,
    WebUsage,
)
from ranch.protocol import messages as m
from ranch.protocol.logformat import LogSink
from ranch.protocol.sdnotify import Notifier


class CannotListen(Exception):
    """An address rctld could not listen on (RPC or HTTP): rctld does not start."""

    def __init__(self, what: str, addr: str, error: OSError) -> None:
        super().__init__(f"{what} {addr}: {error.strerror or error}")
        self.what, self.addr, self.error = what, addr, error


def _first_leaf(exc: BaseException) -> Any:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def web_ports(c: Controller) -> tuple[WebNodes, WebJobs, WebEvents, WebAdmin, ReservationBook,
                                       Health, Site]:
    """The HTTP layer's ports, in serve_http's order (mypy checks each owner against its port):
    the nodes' view, the job store, the event log, the admin requests, the reservations, the
    guards and stalls /metrics reports, the site."""
    live = c.liveness
    side = c.jobs
    books = c.accounts
    jobs = WebJobs(side.store, side.listing.list_body, side.listing.encoded,
                   side.submission.submit,
                   side.commands.cancel, side.commands.control, side.accounting.query,
                   side.sched_stats.record, side.why.answer,
                   WebUsage(books.shares_reply, lambda: books.samples, books.sees_all_usage))
    return (nodes_shown(c), jobs, c.eventlog, node_admin(c), c.reservations,
            Health((live.guard, c.drain_guard), live.stalls), c.site)


class Daemon:
    def __init__(
        self,
        config: ClusterConfig,
        key: bytes,
        *,
        state_dir: str,
        host: str,
        port: int,
        config_path: str | None = None,
        on_ready: Callable[[], None] | None = None,
        key_file: str | None = None,
        ignore_damaged: bool = False,
        log_sink: LogSink | None = None,
        notifier: Notifier | None = None,
        store: Store | None = None,
        grace: float = 0.0,
        handover: Callable[[], Awaitable[None]] | None = None,
        save_in_thread: bool = True,
    ) -> None:
        """`on_ready` runs once the saved state is restored, before the first connection;
        `ignore_damaged` (rctld -i): damaged state files are moved aside, not refused;
        `log_sink` is reopened on SIGUSR2 and SIGHUP; `notifier` tells systemd how it goes.
        `store`: where the state lives (default: a FileStore in `state_dir`; the etcd store of
        a controller pair, ctld/pair/controller.py, already read). `grace`: seconds before a
        node's silence counts, from the start (a takeover: the nodes are still finding this
        controller)."""
        self.grace = grace
        self.handover = handover  # rcontrol takeover: give the seat up (ctld/pair/controller.py)
        self.on_ready = on_ready
        self.log_sink = log_sink
        self.notifier = notifier or Notifier("")
        self.config_path = config_path or config.path
        self.state_dir = state_dir
        self.host = host
        self.port = port
        self.ignore_damaged = ignore_damaged  # rctld -i (the store, events, history)
        self._reconfig_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self.listeners: list[Any] = []
        self.http_urls: list[str] = []
        self._build(config, key, key_file, store, save_in_thread)

    def _build(self, config: ClusterConfig, key: bytes, key_file: str | None,
               store: Store | None, save_in_thread: bool) -> None:
        """The composition root: each owner is built once, here, with what it needs."""
        state_dir, ignore_damaged = self.state_dir, self.ignore_damaged
        log_sink, handover = self.log_sink, self.handover
        self.runner = Runner()  # this daemon's nursery, once open (programs, pushes)
        dirty, outbox, events = Wakeup(), Wakeup(), Wakeup()  # a snapshot, a push, an event
        self.changes = ChangeLog(on_dirty=dirty.set, on_outbox=outbox.set)
        self.site = Site(state_dir, key_file,
                         None if log_sink is None else (log_sink.path or ""))
        if ignore_damaged:  # before Server reads it: a damaged file goes aside
            nodecredentials.set_aside_if_damaged(state_dir)
        self.local_store = store is None  # the state is in state_dir (saved there at exit)
        # Any: the file store, or a controller pair's etcd store (ctld/state/etcdstore.py), which
        # also mirrors files and holds the history and events (ctld/state/etcdrecords.py)
        self.store = cast(Any, FileStore(state_dir, ignore_damaged=ignore_damaged,
                                          in_thread=save_in_thread)
                          if store is None else store)
        history_dir = os.path.join(state_dir, DIR_NAME)  # racct's; etcd's too for a pair
        self.controller = ctl = assemble(
            config, changes=self.changes, epoch=getattr(store, "epoch", 0),
            spawn=self.runner.start_soon, site=self.site,
            history=(FileHistory(history_dir) if self.local_store
                     else ReplicatedHistory(history_dir, self.store)),
            on_events_unsaved=events.set)
        self.durability = Durability(ctl.journal_records, ctl.jobs.submission,
                                     self.changes, self.store, outbox)
        self.saver = Saver(ctl.save_doc, ctl.jobs.store, ctl.eventlog,
                           self.changes, self.store, state_dir,
                           local=self.local_store, dirty=dirty, events=events,
                           in_thread=save_in_thread,
                           credential_holders=lambda: list(self.server.node_credentials.on_disk))
        # the rpc server over the owners' ports (ctld/compose/layers.py)
        self.server: Server = rpc_server(
            ctl, key, reconfigure=self.reconfigure, submit=self.durability.submit_now,
            state_dir=state_dir, mirror=None if self.local_store else self.store.put_file,
            takeover=None if handover is None else self.takeover,
            sync=self.durability.durable, spawn=self.runner.start_soon,
            settle_here=self.local_store)  # the file journal's write holds the loop anyway

    @property
    def journal(self) -> Any:
        """The store's journal side (the name the tests and benches know)."""
        return self.store

    def restore(self) -> None:
        """Take back the saved state; integrity.DamagedState (never a silent reset) when a
        file is damaged and rctld was not started with -i."""
        ctl = self.controller
        ctl.eventlog.load(self.state_dir, self.ignore_damaged)
        if ctl.jobs.history is not None:
            ctl.jobs.history.check(self.ignore_damaged)
        doc, records = self.store.load()
        jobs = ctl.jobs.store
        dropped = False  # rctld -i left a damaged accounting tree out
        if doc is None and not records:
            logs.event("no saved state; starting from the config",
                       path=statefile.state_path(self.state_dir))
        else:
            saved, dropped = self._without_damaged_accounts(overlay(doc, records))
            ctl.restore(saved)
        # packs no saved job points into (a snapshot that failed after writing one)
        jobs.bulk_not_written([n for n in bulkfiles.packs(self.state_dir) if n not in jobs.packs],
                              ())
        if self.store.moved_aside or self.store.ignored or dropped:
            self.saver.save_now()  # -i: the next start finds it whole

    def _without_damaged_accounts(self, doc: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """rctld -i: a damaged accounting tree is left out, a fresh one starts (the snapshot
        taken at once replaces it); without -i it refuses the start (ctld/accounts/)."""
        tree = doc.get("accounts")
        if not self.ignore_damaged or tree is None:
            return doc, False
        try:
            serial.from_json(tree)
        except ValueError as exc:
            logs.event("damaged accounting tree ignored (-i); starting with a fresh one",
                       logging.WARNING, error=str(exc))
            return {k: v for k, v in doc.items() if k != "accounts"}, True
        return doc, False

    def takeover(self, who: str) -> m.Ack:
        """rcontrol takeover: answered first, then the seat is given up (a standby wins it)."""
        logs.event("takeover requested; handing the seat over", by=who)
        assert self._nursery is not None and self.handover is not None
        self._nursery.start_soon(self._hand_over)
        return m.Ack()

    async def _hand_over(self) -> None:
        await trio.sleep(0.2)  # the Ack leaves first
        assert self.handover is not None
        await self.handover()

    async def run(
        self, *, signals: bool = False, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
    ) -> None:
        self.restore()
        ctl = self.controller
        ctl.start(self.grace)
        if self.on_ready is not None:
            self.on_ready()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.runner.open(nursery)
                try:
                    self.listeners = await nursery.start(
                        partial(self.server.serve_tcp, self.port, host=self.host)
                    )
                except OSError as exc:
                    raise CannotListen("RPC", f"{self.host}:{self.port}", exc) from exc
                addrs = ", ".join(_listener_addr(x) for x in self.listeners)
                self.site.listening(_listener_addr(self.listeners[0]))
                logs.event("listening", addr=addrs, nodes=len(ctl.registry.nodes),
                           cluster=ctl.registry.config.cluster_name)
                nursery.start_soon(ctl.deadlines.run, ctl.on_deadlines)
                nursery.start_soon(self.saver.run)
                nursery.start_soon(self.durability.run_outbox)
                nursery.start_soon(self.store.commits.run)
                nursery.start_soon(self.saver.run_events)
                nursery.start_soon(ctl.jobs.accounting.keep, self.saver.in_thread)
                nursery.start_soon(self._power_save)
                nursery.start_soon(ctl.power.remove_stale_files)
                nursery.start_soon(ctl.jobs.backfill.run)  # sched/backfill (issue 44)
                nursery.start_soon(ctl.jobs.priorities.run)  # priority/multifactor (issue 44)
                nursery.start_soon(ctl.accounts.run_usage)  # fair-share usage (issue 43)
                if ctl.registry.config.http.listen:  # issue 15: rctld over HTTP
                    await self._start_http(nursery)
                if signals:
                    nursery.start_soon(handle_signals, self.notifier, self.log_sink,
                                       self.reconfigure, self.stop)
                self.notifier.ready(f"listening on {addrs}")
                task_status.started(self.listeners)
        finally:
            self.notifier.stopping()
            acct.flush_now(ctl.jobs.history)  # before the snapshot purges their jobs
            self.saver.save_now()
            self.store.close()
            self.saver.flush_events()

    async def _start_http(self, nursery: trio.Nursery) -> None:
        from ranch.ctld.web.server import serve_http

        settings = self.controller.registry.config.http
        try:
            self.http_urls = await nursery.start(serve_http, *web_ports(self.controller), settings,
                                                 self.durability)
        except* OSError as group:  # hypercorn's nurseries wrap it
            raise CannotListen("HTTP", settings.listen or "", _first_leaf(group)) from None
        logs.event("HTTP listening", url=" ".join(self.http_urls), auth=settings.auth)

    def stop(self) -> None:
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _power_save(self) -> None:
        while True:
            await trio.sleep(self.controller.power.interval())
            self.controller.power_pass.run()

    async def reconfigure(self, who: str) -> m.ReconfigureResult:
        async with self._reconfig_lock:
            old = self.controller.registry.config
            new = await reconfig.read_new(self.config_path, old, who)
            if isinstance(new, m.ReconfigureResult):  # refused: the running config stays
                return new
            warnings = reconfig.warnings(old, new)
            logs.event("reconfigure", by=who)
            result = self.controller.apply_config(new)
            return attrs.evolve(result, warnings=tuple(warnings))


def _listener_addr(listener: Any) -> str:
    try:
        host, port = listener.socket.getsockname()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError):
        return "?"
