"""NodeDaemon: rnoded's connection to rctld: register, heartbeats, config, reconnects, leaving."""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import psutil
import trio

from ranch import __version__
from ranch.noded import cache, identity, relayjoin
from ranch.noded.gpus import GpuSource
from ranch.noded.hardware import probe_hardware
from ranch.noded.healthloop import (
    HealthCheck,
    HealthRunner,
    default_cycle_delay,
    default_eligible,
    default_is_healthy,
)
from ranch.noded.jobs import JobRunner
from ranch.noded.link import LOST, Requests, SessionLost, goodbye
from ranch.noded.options import NodeOptions
from ranch.noded.pushes import Pushes
from ranch.noded.reboot import run_reboot_program
from ranch.noded.registration import RegisterAndBeat
from ranch.noded.relay import RelayServer
from ranch.noded.steps import StepRunner
from ranch.protocol.client import parse_address
from ranch.protocol.errors import BUSY_RETRY, ProtocolError
from ranch.protocol.messages import (
    ConfigFile,
    Error,
    Hardware,
    NodeSettings,
    ShutdownNotice,
    StepEnd,
)
from ranch.protocol.relaymessages import parse_entry
from ranch.protocol.tcp import FramedStream

log = logging.getLogger("rnoded")

RNODED_VERSION = __version__
DEFAULT_HEARTBEAT = 10.0
DEFAULT_MESSAGE_TIMEOUT = 10.0
# Floors for figures the controller sends: a zero interval would spin heartbeats or reconnects.
MIN_HEARTBEAT = 0.01
MIN_MESSAGE_TIMEOUT = 0.1
# A reply later than this many heartbeat intervals (or MessageTimeout, if sooner) means the
# controller is gone even if TCP has not noticed (half-open connection): reconnect.
REPLY_INTERVALS = 3.0
MIN_REPLY_TIMEOUT = 1.0


def backoff_delay(attempt: int, heartbeat_interval: float, rng: random.Random) -> float:
    """Exponential with jitter, capped at two heartbeat intervals so that a node is back within
    a few intervals of the controller's return."""
    cap = 2.0 * heartbeat_interval
    base = min(1.0, cap / 4.0)
    return min(cap, base * 2.0 ** min(attempt, 30)) * rng.uniform(0.5, 1.0)


class NodeDaemon(RegisterAndBeat):
    """rnoded: the node's connection to rctld (register, heartbeats, config, goodbye) and the
    components it drives: jobs, steps, pushes, the health check."""

    def __init__(
        self,
        opts: NodeOptions,
        gpus: GpuSource,
        *,
        health_runner: HealthRunner | None = None,
        eligible: Callable[[str, tuple[str, ...]], bool] = default_eligible,
        cycle_delay: Callable[[str, float], float] = default_cycle_delay,
        is_healthy: Callable[[str], bool] = default_is_healthy,
        rng: random.Random | None = None,
        on_settings: Callable[[NodeSettings], None] | None = None,
    ) -> None:
        self.opts = opts
        self.gpus = gpus
        self._rng = rng or random.Random()
        self.hardware: Hardware | None = None
        self.boot_time = opts.boot_time if opts.boot_time is not None else psutil.boot_time()
        self.settings: NodeSettings | None = None
        self.config_hash = ""
        self.node_state = "UNKNOWN"
        self.registrations = 0
        self._busy = False  # the last registration was refused for the controller's capacity
        self.seq = 0
        self._wake = trio.Event()
        self._beat_requested = False
        self.requests = Requests()
        self._live: FramedStream | None = None  # a registered connection, for the goodbye
        self._leaving: str | None = None  # why the node goes away (leave), said as it stops
        self._refetch = False  # register afresh on the live connection (SIGHUP)
        self.via_relay: str | None = None  # the relay the session goes through (issue 47)
        self.relay: RelayServer | None = None  # this node relays others (RelayNodes=)
        self._relayed_once = False  # moved to its relay after a registration straight
        self.on_settings = on_settings  # told each config's settings (SlurmdLogFile)
        self.jobs = JobRunner(opts.spool_dir, opts.name, on_change=self._request_beat,
                              gpu_metrics=gpus.metrics)  # per-job GPU use (issue 48)
        self.steps = StepRunner(self.jobs, opts.name, self._report_step)  # rrun's tasks
        self._daemon_nursery: trio.Nursery | None = None  # steps outlive a connection
        self.pushes = Pushes(
            self.jobs,
            self.steps,
            apply_config=self._apply_config,
            request=self._request,
            deliver=self.requests.deliver,
            reboot=self._reboot,
        )
        self.healthcheck = HealthCheck(
            opts.name,
            settings=lambda: self.settings,
            node_state=lambda: self.node_state,
            on_verdict=self._request_beat,
            runner=health_runner,
            eligible=eligible,
            cycle_delay=cycle_delay,
            is_healthy=is_healthy,
        )

    # --------------------------------------------------------------------------------- running

    def leave(self, reason: str) -> None:
        """The node goes away: once cancelled, say so (the controller DOWNs it and requeues its
        jobs). A daemon cancelled without it only stops: the node and its jobs stay."""
        self._leaving = reason

    def refetch(self) -> None:
        """Register again on the live connection, which serves the controller's config afresh
        (SIGHUP, as slurmd's reconfigure); without one, the next connection does it anyway."""
        self._refetch = True
        self._wake.set()

    async def run(self) -> None:
        """Run until cancelled; then close the connection, saying the node leaves if it does."""
        cached = await trio.to_thread.run_sync(cache.load, self.opts.spool_dir)
        if cached is not None:
            log.info("using cached config %s from %s", cached.config_hash[:12], self.opts.spool_dir)
            self.settings, self.config_hash = cached.settings, cached.config_hash
        self.hardware = await trio.to_thread.run_sync(probe_hardware, self.gpus)
        try:
            async with trio.open_nursery() as nursery:
                self._daemon_nursery = nursery
                await nursery.start(self.jobs.run)  # re-adopt jobs before registering
                await self.steps.adopt(nursery)  # and carry on with their steps
                if self.healthcheck.program():
                    await self.healthcheck.run()  # before registering: a sick node never shows idle
                nursery.start_soon(self.healthcheck.loop)
                await self._connection_loop()
        finally:
            with trio.CancelScope(shield=True):
                if self._leaving is not None:
                    await self._goodbye(self._leaving)
                elif self._live is not None:  # as slurmd: a stopping daemon says nothing
                    fs, self._live = self._live, None
                    with trio.move_on_after(0.5):
                        await fs.aclose()

    def heartbeat_interval(self) -> float:
        value = self.settings.heartbeat_interval if self.settings else DEFAULT_HEARTBEAT
        return max(MIN_HEARTBEAT, value)

    def message_timeout(self) -> float:
        value = self.settings.message_timeout if self.settings else DEFAULT_MESSAGE_TIMEOUT
        return max(MIN_MESSAGE_TIMEOUT, value)

    def reply_timeout(self) -> float:
        """How long a request waits for its reply before the connection counts as dead."""
        within_intervals = max(MIN_REPLY_TIMEOUT, REPLY_INTERVALS * self.heartbeat_interval())
        return min(self.message_timeout(), within_intervals)

    async def _connection_loop(self) -> None:
        """Connect to the controllers in turn, as slurmd tries each SlurmctldHost: one that is
        down, or answers that it stands by, sends us on to the next at once; the backoff comes
        only once every one has been tried."""
        at = 0
        attempt = 0
        while True:
            credential = await trio.to_thread.run_sync(identity.load, self.opts.spool_dir)
            servers = relayjoin.targets(self.opts.name, self.settings, credential,
                                        self._servers())
            host, port, relay = servers[at % len(servers)]
            at += 1
            what = f"relay {relay}" if relay else "controller"
            try:
                with trio.fail_after(self.opts.connect_timeout):
                    stream = await trio.open_tcp_stream(host, port)
            except (OSError, trio.TooSlowError) as exc:
                log.warning("cannot connect to %s %s:%d: %s", what, host, port, exc or "timeout")
            else:
                registrations = self.registrations
                self._busy = False
                fs = FramedStream(stream, self.opts.key, message_timeout=self.message_timeout())
                self.via_relay = relay
                refused = relay and await relayjoin.join(
                    fs, self.opts.name, credential, self.opts.protocol_version,
                    self.message_timeout())
                reason = refused or await self._session(fs)
                self._live = None
                with trio.move_on_after(1):
                    await fs.aclose()
                log.warning("connection to %s %s:%d ended: %s", what, host, port, reason)
                if self.registrations > registrations:
                    attempt = 0  # it worked until it broke: come back fast
                    at -= 1  # and to the same place first
                    if reason.startswith("moving to relay"):
                        at = 0
                        continue
                    if len(servers) > 1:
                        continue  # a controller that served and went: its standby may be up
            if self._busy:
                # rctld has no place for us yet and counts us alive meanwhile: come back
                # within BUSY_RETRY (jittered, so that the refused nodes do not come together)
                delay = BUSY_RETRY * self._rng.uniform(0.5, 1.0)
                log.warning("controller %s:%d has no place for this node's connection; "
                            "registering again in %.1f s", host, port, delay)
                await trio.sleep(delay)
                continue
            if at % len(servers):
                continue  # the next controller, at once
            # with a standby, the seat changes hands within seconds: keep looking that often
            delay = backoff_delay(min(attempt, 2) if len(servers) > 1 else attempt,
                                  self.heartbeat_interval(), self._rng)
            attempt += 1
            await trio.sleep(delay)

    def _servers(self) -> tuple[tuple[str, int], ...]:
        """The controllers to try, in order: those the served config lists (a pair), else
        --server's."""
        learned = self.settings.controllers if self.settings is not None else ()
        if len(learned) > 1:
            try:
                return tuple(parse_address(x) for x in learned)
            except ValueError as exc:
                log.warning("served controller list unusable (%s); keeping --server", exc)
        return self.opts.servers or (self.opts.server,)

    async def _session(self, fs: FramedStream) -> str:
        """Serve one connection until it breaks; returns why it ended."""
        reason = "closed"
        async with trio.open_nursery() as nursery:

            def lose(why: str) -> None:
                nonlocal reason
                reason = why
                nursery.cancel_scope.cancel()

            async def guarded(fn: Callable[[FramedStream], Awaitable[None]]) -> None:
                try:
                    await fn(fs)
                except SessionLost as exc:
                    lose(str(exc))
                except ProtocolError as exc:
                    lose(f"protocol error: {exc}")
                except LOST as exc:
                    lose(str(exc) or type(exc).__name__)
                except Exception as exc:  # whatever the controller sent, the node lives on
                    log.exception("connection handler failed")
                    lose(f"internal error: {exc!r}")

            reader = functools.partial(self.pushes.read, session=nursery,
                                       daemon=self._daemon_nursery)
            nursery.start_soon(guarded, reader)
            nursery.start_soon(guarded, self._register_and_beat)
        return reason

    async def _report_step(self, end: StepEnd) -> None:
        """A step's end here, to the controller; raises until it is acknowledged."""
        fs = self._live
        if fs is None:
            raise SessionLost("not connected")
        reply = await self._request(fs, end)
        if isinstance(reply, Error):
            log.warning("controller refused StepEnd %d.%d: %s", end.job_id, end.step_id,
                        reply.message)

    async def _request(self, fs: FramedStream, msg: Any) -> Any:
        return await self.requests.request(
            fs, msg, self.opts.protocol_version, self.reply_timeout()
        )

    async def _apply_config(
        self,
        settings: NodeSettings,
        files: tuple[ConfigFile, ...],
        config_hash: str,
        how: str,
    ) -> None:
        old = self.settings
        self.settings, self.config_hash = settings, config_hash
        try:
            await trio.to_thread.run_sync(
                cache.save, self.opts.spool_dir, cache.CachedConfig(settings, files, config_hash)
            )
        except (OSError, ValueError) as exc:
            log.error("cannot write config cache under %s: %s", self.opts.spool_dir, exc)
        if old != settings:
            log.info(
                "applied %s config %s (heartbeat %gs, health check %s every %gs)",
                how,
                config_hash[:12],
                settings.heartbeat_interval,
                settings.health_check_program or "none",
                settings.health_check_interval,
            )
        self.healthcheck.settings_changed()
        self._start_relay(settings)
        if self.on_settings is not None:
            self.on_settings(settings)
        self._wake.set()

    async def _to_relay(self) -> None:
        """Registered straight, once, to be issued a credential or to learn its relays: the
        node moves to its relay (SessionLost ends this session; the loop starts at the relay).
        Only once per daemon: after a relay's loss the node stays where it went."""
        if self.via_relay is not None:
            self._relayed_once = True  # it was relayed: after a relay's loss, it stays put
        if self.via_relay is not None or self._relayed_once or self.settings is None:
            return
        credential = await trio.to_thread.run_sync(identity.load, self.opts.spool_dir)
        first = relayjoin.targets(self.opts.name, self.settings, credential, ())
        if first:
            self._relayed_once = True
            raise SessionLost(f"moving to relay {first[0][2]}")

    def _start_relay(self, settings: NodeSettings) -> None:
        """RelayNodes names this node: serve as a relay from now on (until rnoded stops)."""
        mine = [e for e in settings.relays if e.partition("=")[0] == self.opts.name]
        if not mine or self.relay is not None or self._daemon_nursery is None:
            return
        try:
            _, host, port = parse_entry(mine[0])
        except ValueError as exc:
            log.error("cannot relay: %s", exc)
            return
        self.relay = RelayServer(self.opts.name, self.opts.key, self._servers,
                                 self.message_timeout, self.opts.connect_timeout)
        self._daemon_nursery.start_soon(self.relay.run, host, port)

    async def _reboot(self, reason: str) -> None:
        await run_reboot_program(self.opts.name, self.settings, reason)

    async def _goodbye(self, reason: str) -> None:
        fs = self._live
        if fs is None:
            log.warning("not connected: the controller was not told that %s leaves",
                        self.opts.name)
            return
        self._live = None
        held = self.jobs.runs()
        if held or self.jobs.endings():
            # The notice makes the node DOWN and requeues its jobs, but they run on without
            # rnoded (and endings wait on disk): a requeue would run them twice (issue 30). Only
            # close; the controller takes the node as not responding, as a stopped slurmd's,
            # until this rnoded's successor registers them. Drain a node before it leaves.
            log.warning("%s does not leave: %d jobs running and %d endings to report (drain "
                        "it first); closing without a notice", self.opts.name, len(held),
                        len(self.jobs.endings()))
            with trio.move_on_after(0.5):
                await fs.aclose()
            return
        await goodbye(fs, ShutdownNotice(self.opts.name, reason, leaving=True),
                      self.requests.next_id(), self.opts.protocol_version,
                      self.opts.shutdown_grace)
