"""Pushes: a controller connection's reader and what it does with config, job and step pushes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ranch.noded.joblaunch import LaunchError
from ranch.noded.jobs import JobRunner
from ranch.noded.link import LOST, SessionLost
from ranch.noded.steps import StepRunner
from ranch.protocol.errors import ProtocolError
from ranch.protocol.messages import (
    Ack,
    ConfigFile,
    ConfigPush,
    Error,
    JobStarted,
    KillJob,
    KillStep,
    LaunchJob,
    LaunchStep,
    NodeSettings,
    RebootNode,
)
from ranch.protocol.tcp import FramedStream

log = logging.getLogger("rnoded")

ApplyConfig = Callable[[NodeSettings, tuple[ConfigFile, ...], str, str], Awaitable[None]]


class Pushes:
    """What the controller sends unasked. `request` sends a request on a connection and returns
    its reply; `deliver` hands a reply to the request waiting for it."""

    def __init__(
        self,
        jobs: JobRunner,
        steps: StepRunner,
        *,
        apply_config: ApplyConfig,
        request: Callable[[FramedStream, Any], Awaitable[Any]],
        deliver: Callable[[Any], None],
        reboot: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.jobs = jobs
        self.steps = steps
        self._apply_config = apply_config
        self._request = request
        self._deliver = deliver
        self._reboot = reboot
        # the newest controller seat seen (issue 32): orders of an older one are refused, so
        # a deposed controller that still reaches this node can start or end nothing here
        self.epoch = 0

    def saw_epoch(self, epoch: int) -> None:
        self.epoch = max(self.epoch, epoch)

    def stale(self, epoch: int) -> bool:
        """An order from an older seat than one already seen (0: a controller without one)."""
        if epoch and epoch < self.epoch:
            return True
        self.saw_epoch(epoch)
        return False

    async def read(
        self, fs: FramedStream, *, session: trio.Nursery, daemon: trio.Nursery | None
    ) -> None:
        """The only receiver: pushes are handled here, replies go to their waiting request.
        `session` is the connection's nursery, `daemon` the daemon's (steps outlive a
        connection)."""
        while True:
            try:
                frame = await fs.receive()
            except ProtocolError as exc:
                if exc.fatal:
                    raise
                log.warning("refused a frame from the controller: %s", exc)
                continue
            if isinstance(frame.msg, ConfigPush):
                await self._apply_config(
                    frame.msg.settings, frame.msg.config_files, frame.msg.config_hash, "pushed"
                )
                await fs.send(Ack(), frame.request_id, frame.version)
                continue
            if isinstance(frame.msg, LaunchJob | KillJob) and self.stale(frame.msg.epoch):
                log.warning("refused %s from a deposed controller (epoch %d, current %d)",
                            type(frame.msg).__name__, frame.msg.epoch, self.epoch)
                await fs.send(Error("stale_epoch", f"epoch {frame.msg.epoch} is older than "
                                    f"{self.epoch}: not the controller", "epoch"),
                              frame.request_id, frame.version)
                continue
            if isinstance(frame.msg, LaunchJob):
                # Not inline: the reader must keep delivering replies while the job starts.
                self.jobs.announce(frame.msg.job)
                session.start_soon(self._launch_job, fs, frame)
                continue
            if isinstance(frame.msg, LaunchStep | KillStep) and daemon:
                session.start_soon(self._step_push, fs, frame, daemon)
                continue
            if isinstance(frame.msg, RebootNode):
                # In the daemon's nursery: a connection that ends must not stop the reboot.
                if self._reboot is not None:
                    (daemon or session).start_soon(self._reboot, frame.msg.reason)
                await fs.send(Ack(), frame.request_id, frame.version)
                continue
            if isinstance(frame.msg, KillJob):
                job = frame.msg
                await self.steps.job_killed(job.job_id, job.signal)
                # "time limit": rctld ends a run whose limit rcontrol update lowered
                state = "TIMEOUT" if job.reason == "time limit" else "CANCELLED"
                if not await self.jobs.kill(job.job_id, job.signal, job.reason, state=state,
                                            run=job.restarts):
                    log.info("KillJob for job %d, which does not run here", job.job_id)
                await fs.send(Ack(), frame.request_id, frame.version)
                continue
            self._deliver(frame)

    async def _launch_job(self, fs: FramedStream, frame: Any) -> None:
        spec = frame.msg.job
        started: JobStarted | None = None
        try:
            # Shielded: a connection lost mid-launch must not leave a started job untracked
            # (the launch is bounded by the runner's launch timeout).
            with trio.CancelScope(shield=True):
                await self.jobs.launch(spec)
        except LaunchError as exc:
            reply: Any = Error("launch_failed", str(exc), "job")
        except Exception as exc:  # a bug in the runner must not take the node down
            log.exception("launching job %d failed", spec.job_id)
            reply = Error("internal", f"launch of job {spec.job_id}: {exc!r}", "job")
        else:
            running = self.jobs.running.get(spec.job_id)
            if running is not None and running.spec.restarts == spec.restarts:
                # The launch confirmed with its start time: in the answer when the controller
                # asked for it there, else (version 5 on) as a request of the node's own
                started = JobStarted(spec.job_id, spec.restarts, running.started_at,
                                     answers_launch=frame.msg.started_answer)
            reply = started if started is not None and started.answers_launch else Ack()
        try:
            await fs.send(reply, frame.request_id, frame.version)
        except (ProtocolError, *LOST) as exc:  # the job's state still reaches the next beats
            log.warning("cannot answer LaunchJob %d: %s", spec.job_id, exc)
            return
        if started is not None and reply is not started and frame.version >= 5:
            # If this is lost, the run in the next heartbeat confirms the launch (with the
            # controller's own start time), as it does for a lost answer.
            try:
                await self._request(fs, started)
            except (ProtocolError, SessionLost, *LOST) as exc:
                log.warning("cannot confirm the launch of job %d: %s", spec.job_id, exc)

    async def _step_push(self, fs: FramedStream, frame: Any, daemon: trio.Nursery) -> None:
        """LaunchStep (Ack once the tasks run) or KillStep (Ack at once), noded/steps.py."""
        msg = frame.msg
        reply: Any = Ack()
        if isinstance(msg, KillStep):
            daemon.start_soon(self.steps.kill, msg.job_id, msg.step_id, msg.signal)
        else:
            try:
                await self.steps.launch(msg.step, daemon)
            except LaunchError as exc:
                reply = Error("launch_failed", str(exc), "step")
        try:
            await fs.send(reply, frame.request_id, frame.version)
        except (ProtocolError, *LOST) as exc:
            log.warning("cannot answer %s: %s", type(msg).__name__, exc)
