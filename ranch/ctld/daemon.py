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
from ranch.ctld import acct, eventlog, gctune, integrity, jobbulk, logs, nodeident, statefile
from ranch.ctld.changelog import ChangeLog
from ranch.ctld.cluster import Cluster
from ranch.ctld.etcdrecords import ReplicatedHistory, put_events
from ranch.ctld.history import DIR_NAME, FileHistory
from ranch.ctld.integrity import DamagedState
from ranch.ctld.runner import Runner
from ranch.ctld.server import Server
from ranch.ctld.site import Site
from ranch.ctld.store import FileStore, Store
from ranch.protocol import messages as m
from ranch.protocol.logformat import LogSink
from ranch.protocol.sdnotify import Notifier

# Seconds between snapshots (the state file). A SIGKILL loses nothing in between: every change a
# reply confirmed is in the journal; a snapshot only lets the journal's older segments go.
SAVE_INTERVAL = 5.0
EVENT_SAVE_INTERVAL = 0.5  # coalescing window of event log appends


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
    ) -> None:
        """`on_ready` runs once the saved state is restored, before the first connection;
        `ignore_damaged` (rctld -i): damaged state files are moved aside, not refused;
        `log_sink` is reopened on SIGUSR2 and SIGHUP; `notifier` tells systemd how it goes.
        `store`: where the state lives (default: a FileStore in `state_dir`; the etcd store of
        a controller pair, ctld/ha.py, already read). `grace`: seconds before a node's silence
        counts, from the start (a takeover: the nodes are still finding this controller)."""
        self.grace = grace
        self.handover = handover  # rcontrol takeover: give the seat up (ctld/ha.py)
        self.on_ready = on_ready
        self.log_sink = log_sink
        self.notifier = notifier or Notifier("")
        self.config_path = config_path or config.path
        self.state_dir = state_dir
        self.host = host
        self.port = port
        self._dirty = trio.Event()
        self._outbox_ready = trio.Event()
        self._events_unsaved = trio.Event()
        self.ignore_damaged = ignore_damaged  # rctld -i (the store, events, history)
        # The composition root: each owner is built once, here, with what it needs.
        self.runner = Runner()  # this daemon's nursery, once open (programs, pushes)
        self.changes = ChangeLog(on_dirty=self._mark_dirty, on_outbox=self._poke_outbox)
        self.site = Site(state_dir, key_file,
                         None if log_sink is None else (log_sink.path or ""))
        if ignore_damaged:  # before Server reads it: a damaged file goes aside
            _credentials_aside(state_dir)
        self.local_store = store is None  # the state is in state_dir (saved there at exit)
        # Any: the file store, or a controller pair's etcd store (ctld/etcdstore.py), which
        # also mirrors files and holds the history and events (ctld/etcdrecords.py)
        self.store = cast(Any, FileStore(state_dir, ignore_damaged=ignore_damaged)
                          if store is None else store)
        history_dir = os.path.join(state_dir, DIR_NAME)  # racct's; etcd's too for a pair
        self.cluster = Cluster(
            config, changes=self.changes, epoch=getattr(store, "epoch", 0),
            spawn=self.runner.start_soon, site=self.site,
            history=(FileHistory(history_dir) if self.local_store
                     else ReplicatedHistory(history_dir, self.store)),
            on_events_unsaved=self._events_unsaved.set)
        self.server = Server(self.cluster, key, reconfigure=self.reconfigure,
                             submit=self.submit_job, state_dir=state_dir,
                             mirror=None if self.local_store else self.store.put_file,
                             takeover=None if handover is None else self.takeover,
                             sync=self.durable, spawn=self.runner.start_soon)
        self.next_pack = 1 + max(jobbulk.packs(state_dir), default=0)  # ctld/jobbulk.py
        self._reconfig_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self.listeners: list[Any] = []
        self.http_urls: list[str] = []
        self.save_in_thread = True  # tests under MockClock write inline, so time stays exact

    def _mark_dirty(self) -> None:
        self._dirty.set()

    def _poke_outbox(self) -> None:
        self._outbox_ready.set()

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
        jobs = self.cluster.jobs
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
        if self.store.moved_aside:  # what was taken from them now lives in no journal
            self.save_now()

    async def durable(self) -> None:
        """Return once every change made so far is on disk (group commit: the changes of every
        caller that arrives meanwhile share one write). OSError when they could not be written;
        they stay queued for the next try."""
        changes = self.changes
        if changes.pending():
            taken = changes.take()
            ticket = self.store.append(self.cluster.journal_records(taken))
            try:
                await self.store.wait(ticket)
            except OSError:
                changes.put_back(taken)
                raise
        else:
            await self.store.wait(self.store.last_ticket)

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

    async def submit_job(self, msg: m.SubmitJob) -> m.SubmitReply | m.Error:
        """Accept a job: checked, queued and scheduled, then on disk (as submitted, or already
        RUNNING: one write) before the reply. Its LaunchJob waits in the outbox for the same
        write, so no job runs that the journal lacks; if the write fails, it is retracted."""
        jobs = self.cluster.jobs
        built = jobs.build(msg)
        if isinstance(built, m.Error):
            return built
        reply = jobs.accept(built)
        try:
            await self.durable()
        except OSError as exc:  # never acknowledged, never launched: as if never submitted
            jobs.retract(built)
            logs.event("job journal write failed", logging.ERROR, error=str(exc))
            return m.Error("internal", f"job {built[0].id} could not be written to "
                           f"{self.store.path}: {exc.strerror or exc}")
        return reply

    async def flush_outbox(self) -> bool:
        """Send the pushes queued so far, in order, once what led to them is on disk."""
        batch = self.changes.take_outbox()
        try:
            await self.durable()
        except OSError as exc:
            logs.event("journal write failed; launches and kills wait", logging.ERROR,
                       error=str(exc))
            self.changes.put_back_outbox(batch)
            return False
        for fn, args in batch:
            fn(*args)
        return True

    async def _outbox(self) -> None:
        """Pushes that follow from changes (LaunchJob, KillJob) leave once those are on disk,
        one batch after the other, so that a node gets them in the order they were made."""
        while True:
            await self._outbox_ready.wait()
            self._outbox_ready = trio.Event()
            if not await self.flush_outbox():
                self._outbox_ready.set()
                await trio.sleep(1.0)

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
                nursery.start_soon(self._saver)
                nursery.start_soon(self._outbox)
                nursery.start_soon(self.store.committer)
                nursery.start_soon(self._event_saver)
                nursery.start_soon(acct.keep_history, self.cluster.jobs, self.cluster.jobs.history,
                                   self.save_in_thread)
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
            self.save_now()
            self.store.close()
            try:
                eventlog.flush(self.cluster.eventlog, self.state_dir)
            except OSError as exc:
                logs.event("event log save failed", logging.ERROR, error=str(exc))

    async def _start_http(self, nursery: trio.Nursery) -> None:
        from ranch.ctld.web.server import serve_http

        settings = self.cluster.config.http
        try:
            self.http_urls = await nursery.start(serve_http, self.cluster, settings)
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

    def _snapshot_doc(self) -> dict[str, Any]:
        doc = self.cluster.save_doc()
        doc["journal_seq"] = self.store.seq  # every record handed to the store so far
        doc["journal_keep_from"] = self.store.rotate()  # later records go to a new segment
        return doc

    def save_now(self) -> None:
        """Write the state file synchronously (shutdown). Not for a replicated store: its
        journal already holds everything, and a controller that lost the seat may write no
        more."""
        if not self.local_store:
            return
        try:
            self.store.save(self._snapshot_doc())
            logs.event("state saved", path=statefile.state_path(self.state_dir))
        except OSError as exc:
            logs.event("state save failed", logging.ERROR, error=str(exc))

    async def _saver(self) -> None:
        self.store.in_thread = self.save_in_thread
        while True:
            await self._dirty.wait()
            self._dirty = trio.Event()
            await self.save_snapshot()
            gctune.release_free_memory()
            await trio.sleep(SAVE_INTERVAL)

    async def save_snapshot(self) -> bool:
        """One snapshot: the new jobs' bulk packed, the state file, the journal trimmed, the
        files of purged jobs removed. False (logged, retried by the saver) if it failed."""
        doc = self._snapshot_doc()  # built here; the entries are never mutated later
        jobs = self.cluster.jobs
        bulk, gone = jobs.take_bulk()
        pack, placed = self.next_pack, list[tuple[int, int, int]]()
        if bulk:
            self.next_pack += 1
        try:
            await self.store.snapshot(doc, doc["journal_keep_from"],
                                      partial(self._write_bulk, pack, bulk, placed),
                                      partial(self._remove_bulk, gone))
        except OSError as exc:
            logs.event("state save failed", logging.ERROR, error=str(exc))
            # no saved record points into a pack it wrote: the next snapshot writes anew
            jobs.bulk_not_written([pack, *gone[1]] if placed else gone[1], gone[0])
            self.changes.save_failed()
            self._dirty.set()
            return False
        if placed:
            jobs.bulk_written(pack, placed)
        return True

    def _write_bulk(self, pack: int, bulk: list[tuple[int, str, tuple | bytes]],
                    placed: list[tuple[int, int, int]]) -> None:
        """In the snapshot's thread: the new jobs' scripts and environments in one pack, before
        the snapshot lets go of the journal segment that holds them."""
        placed += jobbulk.write_pack(self.state_dir, pack, bulk)

    def _remove_bulk(self, gone: tuple[list[int], list[int]]) -> None:
        """In the snapshot's thread, once the snapshot without them is on disk: the files of
        purged jobs (a crash before it must find the files its saved records point to)."""
        for jid in gone[0]:
            jobbulk.remove(self.state_dir, jid)
        for pack in gone[1]:
            jobbulk.remove_pack(self.state_dir, pack)

    async def _event_saver(self) -> None:
        """Appends new events to the state dir's event log, batched like state saves."""
        log = self.cluster.eventlog
        while True:
            await self._events_unsaved.wait()
            self._events_unsaved = trio.Event()
            log.on_unsaved = self._events_unsaved.set
            batch, everything = log.take_unsaved()
            try:
                if not self.local_store:  # etcd first: a retry puts the same keys again
                    await put_events(self.store, batch, everything)
                if self.save_in_thread:
                    n = await trio.to_thread.run_sync(eventlog.write, self.state_dir, batch,
                                                      everything)
                else:
                    n = eventlog.write(self.state_dir, batch, everything)
                log.file_lines = n if everything is not None else log.file_lines + n
            except OSError as exc:
                logs.event("event log save failed", logging.ERROR, error=str(exc))
                log.unsaved[:0] = batch
                self._events_unsaved.set()
            await trio.sleep(EVENT_SAVE_INTERVAL)

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
