"""rnoded's registration and heartbeats on one connection: what it tells the controller, and what
it does with the answers (job endings acknowledged, node state, config to fetch)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from ranch import __version__
from ranch.noded import identity
from ranch.noded.hardware import probe_metrics
from ranch.noded.link import SessionLost
from ranch.protocol.errors import BUSY
from ranch.protocol.messages import (
    ConfigFile,
    Error,
    Hardware,
    Heartbeat,
    HeartbeatReply,
    JobEnd,
    NodeSettings,
    Register,
    RegisterReply,
)
from ranch.protocol.tcp import FramedStream

if TYPE_CHECKING:
    from ranch.noded.gpus import GpuSource
    from ranch.noded.healthloop import HealthCheck
    from ranch.noded.jobs import JobRunner
    from ranch.noded.options import NodeOptions
    from ranch.noded.pushes import Pushes

log = logging.getLogger("rnoded")

RNODED_VERSION = __version__


class RegisterAndBeat:
    """NodeDaemon's part that registers and beats (its state is the daemon's own)."""

    opts: NodeOptions
    gpus: GpuSource
    hardware: Hardware | None
    boot_time: float
    config_hash: str
    node_state: str
    registrations: int
    _busy: bool
    seq: int
    _wake: trio.Event
    _beat_requested: bool
    _live: FramedStream | None
    _refetch: bool
    via_relay: str | None  # the relay this session goes through (noded/relayjoin.py)
    jobs: JobRunner
    pushes: Pushes
    healthcheck: HealthCheck

    # NodeDaemon's own, used here too
    def heartbeat_interval(self) -> float:
        raise NotImplementedError

    async def _request(self, fs: FramedStream, msg: Any) -> Any:
        raise NotImplementedError

    async def _to_relay(self) -> None:
        raise NotImplementedError

    async def _apply_config(self, settings: NodeSettings, files: tuple[ConfigFile, ...],
                            config_hash: str, how: str) -> None:
        raise NotImplementedError

    async def _jobs_acknowledged(self, ended: tuple[JobEnd, ...], kill: tuple[int, ...],
                                 kill_runs: tuple[tuple[int, int], ...] = ()) -> None:
        await self.jobs.acknowledge(ended)
        await self.jobs.kill_silently(kill, kill_runs)

    async def _register_and_beat(self, fs: FramedStream) -> None:
        while True:
            await self._register(fs)
            await self._to_relay()  # registered straight and told of its relay: move there
            self._live = fs
            await self._heartbeat_loop(fs)  # returns when the controller forgot us
            self._live = None

    async def _register(self, fs: FramedStream) -> None:
        reply = await self._register_once(fs)
        if not reply.accepted and reply.health_check_first and reply.settings is not None:
            await self._health_check_first(reply)
            reply = await self._register_once(fs)  # at once: the controller is waiting for it
        if not reply.accepted:
            log.error("controller refused registration of %s: %s", self.opts.name, reply.reason)
            raise SessionLost(f"registration refused: {reply.reason}")
        if reply.settings is not None:
            await self._apply_config(
                reply.settings, reply.config_files, reply.config_hash, "served"
            )
        self.registrations += 1
        self._set_node_state(reply.node_state or self.node_state)
        log.info("registered %s with the controller (state %s)", self.opts.name, self.node_state)

    async def _register_once(self, fs: FramedStream) -> RegisterReply:
        assert self.hardware is not None
        msg = Register(
            name=self.opts.name,
            hardware=self.hardware,
            boot_time=self.boot_time,
            rnoded_version=RNODED_VERSION,
            config_hash=self.config_hash,
            health=self.healthcheck.health,
            job_ids=self.jobs.job_ids(),
            runs=self.jobs.runs(),
            jobs_ended=self.jobs.endings(),
            dynamic=self.opts.dynamic,
            dynamic_conf=self.opts.dynamic_conf,
            # through a relay the node key proves the name; the credential never crosses it
            node_credential=None if self.via_relay else await trio.to_thread.run_sync(
                identity.load, self.opts.spool_dir),
        )
        reply = await self._request(fs, msg)
        if isinstance(reply, Error):
            self._busy = reply.code == BUSY
            raise SessionLost(f"registration answered with {reply.code}: {reply.message}")
        if not isinstance(reply, RegisterReply):
            raise SessionLost(f"registration answered with {type(reply).__name__}")
        if reply.accepted and self.pushes.stale(reply.epoch):  # a deposed controller
            raise SessionLost(f"controller's epoch {reply.epoch} is older than "
                              f"{self.pushes.epoch}: not the controller")
        if reply.accepted:
            if reply.node_credential:
                await self._keep_credential(reply.node_credential)
            await self._jobs_acknowledged(msg.jobs_ended, reply.kill_job_ids, reply.kill_runs)
        return reply

    async def _keep_credential(self, credential: str) -> None:
        try:
            await trio.to_thread.run_sync(identity.save, self.opts.spool_dir, credential)
        except OSError as exc:
            log.error("cannot keep the node credential under %s: %s (the next registration "
                      "will be refused until an admin runs rcontrol approve NodeName=%s)",
                      self.opts.spool_dir, exc, self.opts.name)
            return
        log.info("node credential issued by the controller, kept in %s", self.opts.spool_dir)

    async def _health_check_first(self, reply: RegisterReply) -> None:
        """A node without cached config learns its HealthCheckProgram here: cache the config,
        run the check (the controller has not heard of us yet: UNKNOWN), then register."""
        assert reply.settings is not None
        log.info("controller asks for a health check before registration")
        # The first run is ours, not the health loop's (which wakes on the new settings).
        self.healthcheck.first_run_is_registrations()
        await self._apply_config(reply.settings, reply.config_files, reply.config_hash, "served")
        self._set_node_state("UNKNOWN")
        await self.healthcheck.run()
        if self.healthcheck.health is None:  # the runner failed; registering again would loop
            raise SessionLost("health check required before registration could not be run")

    async def _heartbeat_loop(self, fs: FramedStream) -> None:
        while True:
            if self._refetch:
                self._refetch = False
                log.info("registering afresh to fetch the controller's config")
                return
            self._beat_requested = False
            # Abandoned on cancel: a hung NVML call must not hold up SIGTERM.
            metrics = await trio.to_thread.run_sync(
                probe_metrics, self.gpus, abandon_on_cancel=True
            )
            self.seq += 1
            report = self.healthcheck.unsent
            ended = self.jobs.endings()
            beat = Heartbeat(self.opts.name, self.seq, metrics, self.jobs.job_ids(), report, ended,
                             runs=self.jobs.runs())
            reply = await self._request(fs, beat)
            if isinstance(reply, Error):
                log.warning(
                    "controller answered heartbeat with %s (%s); registering afresh",
                    reply.code,
                    reply.message,
                )
                return
            if not isinstance(reply, HeartbeatReply):
                log.warning("unexpected %s in reply to a heartbeat", type(reply).__name__)
            else:
                self.healthcheck.delivered(report)
                await self._jobs_acknowledged(ended, reply.kill_job_ids, reply.kill_runs)
                self._set_node_state(reply.node_state)
                if reply.config_hash and reply.config_hash != self.config_hash:
                    log.info(
                        "controller config %s differs from ours %s; expecting a push",
                        reply.config_hash[:12],
                        self.config_hash[:12],
                    )
            await self._wait_next_beat(trio.current_time())

    async def _wait_next_beat(self, last: float) -> None:
        """Until an interval after `last` (re-read when settings change) or a beat is requested."""
        while not (self._beat_requested or self._refetch):
            wake = self._wake = trio.Event()
            remaining = last + self.heartbeat_interval() - trio.current_time()
            if remaining <= 0:
                return
            with trio.move_on_after(remaining):
                await wake.wait()

    def _request_beat(self) -> None:
        self._beat_requested = True
        self._wake.set()

    def _set_node_state(self, state: str) -> None:
        if state and state != self.node_state:
            log.info("node state %s -> %s", self.node_state, state)
            self.node_state = state
