"""The running controller: one nursery of its loops; SIGTERM cancels it after a last state save."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, cast

import attrs
import trio

from ranch.conf.build import load_config
from ranch.conf.errors import ConfigError
from ranch.conf.model import ClusterConfig
from ranch.ctld import logs
from ranch.ctld.jobs import acct, jobbulk
from ranch.ctld.jobs.history import DIR_NAME, FileHistory
from ranch.ctld.nodes.cluster import Cluster
from ranch.ctld.rpc import nodeident
from ranch.ctld.rpc.server import Server
from ranch.ctld.runner import Runner
from ranch.ctld.site import Site
from ranch.ctld.state import integrity, statefile
from ranch.ctld.state.changelog import ChangeLog
from ranch.ctld.state.durability import Durability
from ranch.ctld.state.etcdrecords import ReplicatedHistory
from ranch.ctld.state.integrity import DamagedState
from ranch.ctld.state.saving import Saver
from ranch.ctld.state.store import FileStore, Store
from ranch.ctld.wakeup import Wakeup
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


def format_errors(exc: ConfigError) -> tuple[str, ...]:
    return tuple(f"{d.path}:{d.line}:{d.col}: {d.message}" for d in exc.errors)


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
        # The composition root: each owner is built once, here, with what it needs.
        self.runner = Runner()  # this daemon's nursery, once open (programs, pushes)
        dirty, outbox, events = Wakeup(), Wakeup(), Wakeup()  # a snapshot, a push, an event
        self.changes = ChangeLog(on_dirty=dirty.set, on_outbox=outbox.set)
        self.site = Site(state_dir, key_file,
                         None if log_sink is None else (log_sink.path or ""))
        if ignore_damaged:  # before Server reads it: a damaged file goes aside
            _credentials_aside(state_dir)
        self.local_store = store is None  # the state is in state_dir (saved there at exit)
        # Any: the file store, or a controller pair's etcd store (ctld/state/etcdstore.py), which
        # also mirrors files and holds the history and events (ctld/state/etcdrecords.py)
        self.store = cast(Any, FileStore(state_dir, ignore_damaged=ignore_damaged,
                                          in_thread=save_in_thread)
                          if store is None else store)
        history_dir = os.path.join(state_dir, DIR_NAME)  # racct's; etcd's too for a pair
        self.cluster = Cluster(
            config, changes=self.changes, epoch=getattr(store, "epoch", 0),
            spawn=self.runner.start_soon, site=self.site,
            history=(FileHistory(history_dir) if self.local_store
                     else ReplicatedHistory(history_dir, self.store)),
            on_events_unsaved=events.set)
        self.durability = Durability(self.cluster, self.changes, self.store, outbox)
        self.saver = Saver(self.cluster, self.changes, self.store, state_dir,
                           local=self.local_store, dirty=dirty, events=events,
                           in_thread=save_in_thread,
                           credential_holders=lambda: list(self.server.node_credentials.on_disk))
        self.server = Server(self.cluster, key, reconfigure=self.reconfigure,
                             submit=self.durability.submit, state_dir=state_dir,
                             mirror=None if self.local_store else self.store.put_file,
                             takeover=None if handover is None else self.takeover,
                             sync=self.durability.durable, spawn=self.runner.start_soon)
        self._reconfig_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self.listeners: list[Any] = []
        self.http_urls: list[str] = []

    @property
    def journal(self) -> Any:
        """The store's journal side (the name the tests and benches know)."""
        return self.store

    def restore(self) -> None:
        """Take back the saved state; integrity.DamagedState (never a silent reset) when a
        file is damaged and rctld was not started with -i."""
        self.cluster.eventlog.load(self.state_dir, self.ignore_damaged)
        if self.cluster.jobs.history is not None:
            self.cluster.jobs.history.check(self.ignore_damaged)
        doc, records = self.store.load()
        jobs = self.cluster.jobs.store
        if doc is None and not records:
            logs.event("no saved state; starting from the config",
                       path=statefile.state_path(self.state_dir))
        else:
            doc = overlay(doc, records)
            if doc.get("nodes"):
                self.cluster.restore(doc)
            else:
                jobs.restore(doc.get("jobs"))
                self.cluster.reservations.restore(doc.get("reservations"))
        # packs no saved job points into (a snapshot that failed after writing one)
        jobs.bulk_not_written([n for n in jobbulk.packs(self.state_dir) if n not in jobs.packs],
                              ())
        if self.store.moved_aside or self.store.ignored:  # -i: the next start finds it whole
            self.saver.save_now()

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
        self.cluster.start(self.grace)
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
                logs.event("listening", addr=addrs, nodes=len(self.cluster.nodes),
                           cluster=self.cluster.config.cluster_name)
                nursery.start_soon(self.cluster.deadlines.run, self.cluster.on_deadlines)
                nursery.start_soon(self.saver.run)
                nursery.start_soon(self.durability.run_outbox)
                nursery.start_soon(self.store.committer)
                nursery.start_soon(self.saver.run_events)
                nursery.start_soon(self.cluster.jobs.accounting.keep, self.saver.in_thread)
                nursery.start_soon(self._power_save)
                nursery.start_soon(self.cluster.power.remove_stale_files)
                if self.cluster.config.http.listen:  # issue 15: rctld over HTTP
                    await self._start_http(nursery)
                if signals:
                    nursery.start_soon(self.handle_signals)
                self.notifier.ready(f"listening on {addrs}")
                task_status.started(self.listeners)
        finally:
            self.notifier.stopping()
            acct.flush_now(self.cluster.jobs.history)  # before the snapshot purges their jobs
            self.saver.save_now()
            self.store.close()
            self.saver.flush_events()

    async def _start_http(self, nursery: trio.Nursery) -> None:
        from ranch.ctld.web.server import serve_http
        from ranch.ctld.web.webports import WebServices

        settings = self.cluster.config.http
        web_side: WebServices = self.cluster  # what the HTTP layer may reach (mypy checks it)
        try:
            self.http_urls = await nursery.start(serve_http, web_side, settings,
                                                 self.durability)
        except* OSError as group:  # hypercorn's nurseries wrap it
            raise CannotListen("HTTP", settings.listen or "", _first_leaf(group)) from None
        logs.event("HTTP listening", url=" ".join(self.http_urls), auth=settings.auth)

    def stop(self) -> None:
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def handle_signals(self) -> None:
        """As slurmctld: SIGTERM/SIGINT stop (the state is saved on the way out); SIGHUP
        reconfigures and reopens the log file; SIGUSR2 reopens it (logrotate); SIGUSR1 and
        SIGPIPE are logged and ignored. None ends rctld without a line in its log."""
        handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2, signal.SIGUSR1,
                   signal.SIGPIPE)
        with trio.open_signal_receiver(*handled) as sigs:
            async for sig in sigs:
                name = signal.Signals(sig).name
                if sig == signal.SIGHUP:
                    logs.event("SIGHUP: reconfiguring, reopening the log")
                    self.notifier.reloading()
                    self.reopen_log(name)
                    await self.reconfigure("SIGHUP")
                    self.notifier.ready("reconfigured")
                elif sig == signal.SIGUSR2:
                    self.reopen_log(name)
                elif sig in (signal.SIGTERM, signal.SIGINT):
                    logs.event("shutting down", signal=name)
                    self.stop()
                    return
                else:
                    logs.event("signal ignored", logging.WARNING, signal=name)

    def reopen_log(self, why: str) -> None:
        if self.log_sink is None or self.log_sink.path is None:
            logs.event("log on stderr; nothing to reopen", signal=why)
            return
        try:
            self.log_sink.reopen()
        except OSError as exc:
            logs.event("cannot reopen the log file; writing to the old one", logging.ERROR,
                       path=self.log_sink.path, error=exc.strerror or str(exc))
            return
        logs.event("log file reopened", path=self.log_sink.path, signal=why)

    def save_now(self) -> None:
        self.saver.save_now()

    async def save_snapshot(self) -> bool:
        return await self.saver.save_snapshot()

    async def _power_save(self) -> None:
        while True:
            await trio.sleep(self.cluster.power.interval())
            self.cluster.power_save_pass()

    async def reconfigure(self, who: str) -> m.ReconfigureResult:
        async with self._reconfig_lock:
            old = self.cluster.config
            try:
                new = await trio.to_thread.run_sync(load_config, self.config_path)
            except ConfigError as exc:
                errors = format_errors(exc)
                for err in errors:
                    logs.event("reconfigure refused; keeping the running config",
                               logging.ERROR, by=who, error=err)
                return m.ReconfigureResult(ok=False, errors=errors, config_hash=old.config_hash)
            except OSError as exc:
                err = f"{self.config_path}: {exc.strerror or exc}"
                logs.event("reconfigure refused; keeping the running config", logging.ERROR,
                           by=who, error=err)
                return m.ReconfigureResult(ok=False, errors=(err,), config_hash=old.config_hash)
            warnings = [w.format().splitlines()[0] for w in new.warnings]
            if (new.control.port, new.control.hosts) != (old.control.port, old.control.hosts):
                warnings.append("controller address changed in the config; takes effect at "
                                "restart")
            if new.http != old.http:
                warnings.append("Http* keys changed in the config; take effect at restart")
            if new.control.log_file != old.control.log_file:
                warnings.append("SlurmctldLogFile changed in the config; takes effect at restart")
            for warning in warnings:
                logs.event("reconfigure warning", logging.WARNING, detail=warning)
            logs.event("reconfigure", by=who)
            result = self.cluster.apply_config(new)
            return attrs.evolve(result, warnings=tuple(warnings))


def _listener_addr(listener: Any) -> str:
    try:
        host, port = listener.socket.getsockname()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError):
        return "?"


def _credentials_aside(state_dir: str) -> None:
    try:
        nodeident.read(os.path.join(state_dir, nodeident.FILE))
    except DamagedState as exc:
        aside = integrity.move_aside(exc.path)
        logs.event("damaged node credentials moved aside (-i); every node gets a new one",
                   logging.ERROR, path=exc.path, error=exc.what, moved_to=aside)


def overlay(doc: dict[str, Any] | None, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The snapshot with the journal's records laid over it, in order (a record replaces the
    node's or job's entry). Lines of the version-4 submission journal (a bare job record) add
    only jobs the snapshot never held."""
    doc = dict(doc or {})
    nodes = dict(doc.get("nodes") or {})
    saved_jobs = doc.get("jobs") or {}
    resv = {str(r.get("name")): r for r in (doc.get("reservations") or {}).get("items", ())
            if isinstance(r, dict)}
    next_id = int(saved_jobs.get("next_id", 1))
    jobs: dict[int, Any] = {int(j["id"]): j for j in saved_jobs.get("jobs", ())
                            if isinstance(j, dict) and "id" in j}
    for rec in records:
        try:
            if "node" in rec:
                nodes[str(rec["node"])] = rec["entry"]
            elif "resv" in rec:  # a reservation's record; None: it was deleted
                if rec["entry"] is None:
                    resv.pop(str(rec["resv"]), None)
                else:
                    resv[str(rec["resv"])] = rec["entry"]
            elif "job" in rec:
                jobs[int(rec["job"]["id"])] = rec["job"]
            elif "id" in rec and "seq" not in rec:  # version 4: a submission
                jid = int(rec["id"])
                if jid not in jobs and jid >= next_id:
                    jobs[jid] = rec
        except (KeyError, TypeError, ValueError) as exc:
            logs.event("journal record unreadable; skipped", logging.WARNING, error=repr(exc))
    top = max(jobs, default=0)
    doc["nodes"] = nodes
    doc["jobs"] = {"next_id": max(next_id, top + 1), "jobs": list(jobs.values())}
    counter = int((doc.get("reservations") or {}).get("counter", 0))
    for name in resv:  # a created one the snapshot lacks: its USER_N suffix counts
        tail = name.rsplit("_", 1)[-1]
        if tail.isdigit():
            counter = max(counter, int(tail))
    doc["reservations"] = {"counter": counter, "items": list(resv.values())}
    return doc
