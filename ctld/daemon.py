"""The running controller: one nursery holding the listener, deadline task, saver, power save and
signal handler, so that SIGTERM cancels everything after a last state save."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from functools import partial
from typing import Any

import trio

from conf import ConfigError, load_config
from conf.model import ClusterConfig
from ctld import eventlog, logs, statefile
from ctld.cluster import Cluster
from ctld.jobjournal import Journal
from ctld.jobs import job_json
from ctld.server import Server
from protocol import messages as m

SAVE_INTERVAL = 0.5  # coalescing window of state saves: a SIGKILL loses at most this much


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
    ) -> None:
        """`on_ready` runs once the saved state is restored, before the first connection."""
        self.on_ready = on_ready
        self.config_path = config_path or config.path
        self.state_dir = state_dir
        self.host = host
        self.port = port
        self._dirty = trio.Event()
        self.cluster = Cluster(config, on_dirty=self._mark_dirty)
        self._events_unsaved = trio.Event()
        self.cluster.eventlog.on_unsaved = self._events_unsaved.set
        self.server = Server(self.cluster, key, reconfigure=self.reconfigure,
                             submit=self.submit_job, state_dir=state_dir)
        self.journal = Journal(state_dir)
        # What power programs are told (resume file location; RANCH_SERVER/RANCH_KEY_FILE so an
        # example ResumeProgram can start an rnoded that joins this controller).
        self.cluster.power.state_dir = state_dir
        self.cluster.power.key_file = key_file
        self._reconfig_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self.listeners: list[Any] = []
        self.http_urls: list[str] = []
        self.save_in_thread = True  # tests under MockClock write inline, so time stays exact

    def _mark_dirty(self) -> None:
        self._dirty.set()

    def restore(self) -> None:
        self.cluster.eventlog.load(self.state_dir)
        journal = self.journal.read()
        try:
            doc = statefile.load(self.state_dir)
        except statefile.StateFileError as exc:
            logs.event("saved state unusable; starting from the config", logging.ERROR,
                       error=str(exc))
            doc = None
        if doc is None:
            logs.event("no saved state; starting from the config",
                       path=statefile.state_path(self.state_dir))
            if journal:
                self.cluster.jobs.restore(None, journal)
            return
        self.cluster.restore(doc, journal)

    async def submit_job(self, msg: m.SubmitJob) -> m.SubmitReply | m.Error:
        """Accept a job: checked and built, on disk, and only then queued and scheduled, so an
        acknowledged job survives a SIGKILL of rctld and no job runs that the journal lacks."""
        jobs = self.cluster.jobs
        built = jobs.build(msg)
        if isinstance(built, m.Error):
            return built
        try:
            await self.journal.commit([job_json(j) for j in built])
        except OSError as exc:  # the built jobs are dropped; their ids stay unused
            jobs.drop(built)
            logs.event("job journal write failed", logging.ERROR, error=str(exc))
            return m.Error("internal", f"job {built[0].id} could not be written to "
                           f"{self.journal.path}: {exc.strerror or exc}")
        reply = jobs.accept(built)
        # The jobs that started at once are journalled again, RUNNING (replay keeps the last
        # line of a job), so that a SIGKILL before the next state save keeps them running.
        started = [job_json(j) for j in built if j.state != "PENDING"]
        try:
            await self.journal.commit(started)
        except OSError as exc:  # accepted and on disk as submitted: replay reruns them
            logs.event("job journal write failed", logging.ERROR, error=str(exc))
        return reply

    async def run(
        self, *, signals: bool = False, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
    ) -> None:
        self.restore()
        self.cluster.start()
        if self.on_ready is not None:
            self.on_ready()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.cluster.spawn = nursery.start_soon
                self.server.spawn = nursery.start_soon
                self.listeners = await nursery.start(
                    partial(self.server.serve_tcp, self.port, host=self.host)
                )
                addrs = ", ".join(_listener_addr(x) for x in self.listeners)
                self.cluster.power.server_addr = _listener_addr(self.listeners[0])
                logs.event("listening", addr=addrs, nodes=len(self.cluster.nodes),
                           cluster=self.cluster.config.cluster_name)
                nursery.start_soon(self.cluster.deadlines.run, self.cluster.on_deadlines)
                nursery.start_soon(self._saver)
                nursery.start_soon(self._event_saver)
                nursery.start_soon(self._power_save)
                nursery.start_soon(self.cluster.power.remove_stale_files)
                if self.cluster.config.http.listen:  # issue 15: rctld over HTTP
                    await self._start_http(nursery)
                if signals:
                    nursery.start_soon(self.handle_signals)
                task_status.started(self.listeners)
        finally:
            self.save_now()
            try:
                eventlog.flush(self.cluster.eventlog, self.state_dir)
            except OSError as exc:
                logs.event("event log save failed", logging.ERROR, error=str(exc))

    async def _start_http(self, nursery: trio.Nursery) -> None:
        from ctld.web.server import serve_http

        settings = self.cluster.config.http
        self.http_urls = await nursery.start(serve_http, self.cluster, settings)
        logs.event("HTTP listening", url=" ".join(self.http_urls), auth=settings.auth)

    def stop(self) -> None:
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def handle_signals(self) -> None:
        """SIGTERM/SIGINT: stop (the state is saved on the way out); SIGHUP: reconfigure."""
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as sigs:
            async for sig in sigs:
                if sig == signal.SIGHUP:
                    logs.event("SIGHUP: reconfiguring")
                    await self.reconfigure("SIGHUP")
                else:
                    logs.event("shutting down", signal=signal.Signals(sig).name)
                    self.stop()
                    return

    def save_now(self) -> None:
        """Write the state file synchronously (shutdown)."""
        try:
            statefile.save(self.state_dir, self.cluster.save_doc())
            logs.event("state saved", path=statefile.state_path(self.state_dir))
        except OSError as exc:
            logs.event("state save failed", logging.ERROR, error=str(exc))

    async def _saver(self) -> None:
        self.journal.in_thread = self.save_in_thread
        while True:
            await self._dirty.wait()
            self._dirty = trio.Event()
            doc = self.cluster.save_doc()  # built here; the entries are never mutated later
            try:
                if self.save_in_thread:
                    await trio.to_thread.run_sync(statefile.save, self.state_dir, doc)
                else:
                    statefile.save(self.state_dir, doc)
                await self.journal.trim(doc["jobs"]["next_id"])
            except OSError as exc:
                logs.event("state save failed", logging.ERROR, error=str(exc))
                self.cluster.dirty = True
                self._dirty.set()
            del doc  # entries of nodes changed since are not kept alive by an old document
            await trio.sleep(SAVE_INTERVAL)

    async def _event_saver(self) -> None:
        """Appends new events to the state dir's event log, batched like state saves."""
        log = self.cluster.eventlog
        while True:
            await self._events_unsaved.wait()
            self._events_unsaved = trio.Event()
            log.on_unsaved = self._events_unsaved.set
            batch, everything = log.take_unsaved()
            try:
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
            await trio.sleep(SAVE_INTERVAL)

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
            if (new.control.port, new.control.hosts) != (old.control.port, old.control.hosts):
                logs.event("controller address changed in the config; takes effect at restart",
                           logging.WARNING)
            if new.http != old.http:
                logs.event("Http* keys changed in the config; take effect at restart",
                           logging.WARNING)
            logs.event("reconfigure", by=who)
            return self.cluster.apply_config(new)


def _listener_addr(listener: Any) -> str:
    try:
        host, port = listener.socket.getsockname()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError):
        return "?"
