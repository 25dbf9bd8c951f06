"""rnoded's session carrying jobs: a fake controller on real TCP pushes LaunchJob and KillJob
and reads endings and running jobs from heartbeats and registrations."""

from __future__ import annotations

import functools
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import trio

from ranch.noded.gpus import FakeGpus
from ranch.noded.options import NodeOptions
from ranch.noded.session import NodeDaemon
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.tcp import FramedStream, PeerClosed
from tests.deadline import scaled

KEY = b"j" * 32
# A long interval: a beat that comes early was requested by a job's end.
SETTINGS = m.NodeSettings("test", 30.0, 60.0, 5.0, None, 0.0, 5.0, ("ANY",))


class JobController:
    def __init__(self) -> None:
        self.received: list[object] = []
        self.replies: dict[int, object] = {}  # request id of a push -> the node's answer
        self.kill_next: tuple[int, ...] = ()  # put into the next HeartbeatReply
        self.kill_on_register: tuple[int, ...] = ()
        self.forget = 0  # answer this many beats that carry endings with unknown_node
        self.conn: FramedStream | None = None
        self.port = 0
        self._push_ids = iter(range(1000, 10**6))

    async def start(self, nursery: trio.Nursery) -> None:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, self.handle, 0, host="127.0.0.1")
        )
        self.port = listeners[0].socket.getsockname()[1]

    def of(self, cls: type) -> list:
        return [msg for msg in self.received if isinstance(msg, cls)]

    async def handle(self, stream: trio.SocketStream) -> None:
        fs = self.conn = FramedStream(stream, KEY)
        while True:
            try:
                frame = await fs.receive()
            except (PeerClosed, ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if frame.request_id >= 1000:
                self.replies[frame.request_id] = frame.msg
                continue
            self.received.append(frame.msg)
            reply: object | None = None
            if isinstance(frame.msg, m.Register):
                reply = m.RegisterReply(
                    True, "", SETTINGS, (), "h", "IDLE", kill_job_ids=self.kill_on_register
                )
            elif isinstance(frame.msg, m.Heartbeat) and frame.msg.jobs_ended and self.forget:
                self.forget -= 1  # as rctld after a restart that lost the node: re-register
                reply = m.Error("unknown_node", "no node n1")
            elif isinstance(frame.msg, m.Heartbeat):
                reply = m.HeartbeatReply("MIXED", "h", kill_job_ids=self.kill_next)
                self.kill_next = ()
            elif isinstance(frame.msg, m.ShutdownNotice | m.JobStarted):
                reply = m.Ack()
            if reply is not None:
                await fs.send(reply, frame.request_id, frame.version)

    async def push(self, msg: object) -> object:
        assert self.conn is not None
        request_id = next(self._push_ids)
        await self.conn.send(msg, request_id)
        await wait_for(lambda: request_id in self.replies)
        return self.replies[request_id]

    def ended(self) -> list[m.JobEnd]:
        return [end for hb in self.of(m.Heartbeat) for end in hb.jobs_ended]


async def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    with trio.fail_after(scaled(timeout)):  # stretched as the machine gets busier
        while not cond():
            await trio.sleep(0.01)


def make_daemon(port: int, spool: Path) -> NodeDaemon:
    opts = NodeOptions(
        server=("127.0.0.1", port),
        name="n1",
        key=KEY,
        spool_dir=str(spool),
    )
    return NodeDaemon(opts, FakeGpus(0, "n1", seed=1), rng=random.Random(0))


def job(work: Path, job_id: int, script: str) -> m.JobSpec:
    return m.JobSpec(
        job_id,
        "j",
        "alice",
        os.getuid(),
        os.getgid(),
        "#!/bin/sh\n" + script,
        str(work),
        "slurm-%j.out",
        kill_wait=1.0,
    )


async def test_launch_end_reported_at_once_and_until_acked(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    ctl = JobController()
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path / "spool")
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) == 1)
    script = "while [ ! -e go ]; do sleep 0.02; done\necho ok\n"
    assert await ctl.push(m.LaunchJob(job(tmp_path, 5, script))) == m.Ack()
    daemon._request_beat()
    await wait_for(lambda: any(hb.job_ids == (5,) for hb in ctl.of(m.Heartbeat)))
    (tmp_path / "go").touch()
    # The 30 s interval would hold the news; the job's end asks for a beat at once.
    with trio.fail_after(scaled(5)):
        await wait_for(lambda: bool(ctl.ended()))
    (end,) = ctl.ended()
    assert (end.job_id, end.state, end.exit_code) == (5, "COMPLETED", 0)
    assert (tmp_path / "slurm-5.out").read_text() == "ok\n"
    # The reply to that beat acknowledged it: the next beats do not repeat it.
    assert await ctl.push(m.LaunchJob(job(tmp_path, 6, "exit 2\n"))) == m.Ack()
    await wait_for(lambda: any(e.job_id == 6 for e in ctl.ended()))
    assert [e.job_id for e in ctl.ended()] == [5, 6]
    await wait_for(lambda: daemon.jobs.endings() == ())  # the reply to that beat acknowledged it


async def test_the_start_in_the_launchs_answer_when_the_controller_asks(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Asked (`started_answer`), the node answers LaunchJob with the run's JobStarted and sends
    no request after it; not asked (a controller from before issue 50), it answers Ack, then
    sends its own JobStarted request."""
    ctl = JobController()
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path / "spool")
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) == 1)
    before = time.time()
    answer = await ctl.push(m.LaunchJob(job(tmp_path, 11, "sleep 300\n"), started_answer=True))
    assert isinstance(answer, m.JobStarted) and answer.answers_launch
    assert (answer.job_id, answer.restarts) == (11, 0)
    assert before <= answer.started_at <= time.time()
    assert answer.started_at == daemon.jobs.running[11].started_at
    assert await ctl.push(m.LaunchJob(job(tmp_path, 12, "sleep 300\n"))) == m.Ack()
    await wait_for(lambda: bool(ctl.of(m.JobStarted)))
    # job 11's request would have left right after its answer, before job 12 was pushed
    [request] = ctl.of(m.JobStarted)
    assert (request.job_id, request.restarts, request.answers_launch) == (12, 0, False)
    assert request.started_at == daemon.jobs.running[12].started_at
    for job_id in (11, 12):
        assert await ctl.push(m.KillJob(job_id, 0, "cancelled")) == m.Ack()
    await wait_for(lambda: {e.job_id for e in ctl.ended()} == {11, 12})


async def test_launch_failure_kill_and_kill_list(nursery: trio.Nursery, tmp_path: Path) -> None:
    ctl = JobController()
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path / "spool")
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) == 1)
    reply = await ctl.push(m.LaunchJob(job(tmp_path / "nowhere", 1, "true\n")))
    assert isinstance(reply, m.Error) and reply.code == "launch_failed"
    assert "nowhere" in reply.message
    await wait_for(lambda: any(e.job_id == 1 for e in ctl.ended()))
    assert ctl.ended()[0].state == "LAUNCH_FAILED"

    assert await ctl.push(m.LaunchJob(job(tmp_path, 2, "sleep 300\n"))) == m.Ack()
    assert await ctl.push(m.KillJob(2, 0, "cancelled")) == m.Ack()
    await wait_for(lambda: any(e.job_id == 2 for e in ctl.ended()))
    assert [e.state for e in ctl.ended() if e.job_id == 2] == ["CANCELLED"]
    assert await ctl.push(m.KillJob(99)) == m.Ack()  # not here: nothing to do

    assert await ctl.push(m.LaunchJob(job(tmp_path, 3, "sleep 300\n"))) == m.Ack()
    ctl.kill_next = (3,)
    daemon._request_beat()
    await wait_for(lambda: daemon.jobs.job_ids() == ())
    beats = len(ctl.of(m.Heartbeat))
    daemon._request_beat()
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) > beats)
    assert all(e.job_id != 3 for e in ctl.ended())  # killed on request: no ending


async def test_restarted_rnoded_registers_its_running_jobs(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    ctl = JobController()
    await ctl.start(nursery)
    spool = tmp_path / "spool"
    first = make_daemon(ctl.port, spool)
    scope, stopped = trio.CancelScope(), trio.Event()
    nursery.start_soon(_run_in, scope, first, stopped)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) == 1)
    script = "while [ ! -e go ]; do sleep 0.02; done\n"
    assert await ctl.push(m.LaunchJob(job(tmp_path, 8, script))) == m.Ack()
    scope.cancel()  # rnoded stops; its job runs on
    await stopped.wait()
    # no shutdown notice: it would have the node DOWN and its running job requeued (issue 30)
    assert ctl.of(m.ShutdownNotice) == []
    second = make_daemon(ctl.port, spool)
    nursery.start_soon(second.run)
    await wait_for(lambda: len(ctl.of(m.Register)) == 2)
    assert ctl.of(m.Register)[1].job_ids == (8,)
    (tmp_path / "go").touch()
    await wait_for(lambda: any(e.job_id == 8 for e in ctl.ended()))


async def _run_in(scope: trio.CancelScope, daemon: NodeDaemon,
                  done: trio.Event | None = None) -> None:
    with scope:
        await daemon.run()
    if done is not None:
        done.set()


async def test_sigkilled_rnoded_loses_no_job(nursery: trio.Nursery, tmp_path: Path) -> None:
    """A real rnoded process, SIGKILLed while its job runs: the job goes on, the next rnoded
    reports it running, then reports its end."""
    ctl = JobController()
    await ctl.start(nursery)
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    key_file.chmod(0o600)
    argv = [
        sys.executable,
        "-m",
        "ranch.noded",
        "--server",
        f"127.0.0.1:{ctl.port}",
        "--name",
        "n1",
        "--key-file",
        str(key_file),
        "--spool-dir",
        str(tmp_path / "spool"),
    ]
    root = Path(__file__).resolve().parents[2]

    async def start_rnoded() -> trio.Process:
        return await trio.lowlevel.open_process(argv, cwd=root, stderr=subprocess.DEVNULL)

    first = await start_rnoded()
    try:
        await wait_for(lambda: len(ctl.of(m.Heartbeat)) == 1, 30)
        script = "while [ ! -e go ]; do sleep 0.02; done\necho survived\n"
        assert await ctl.push(m.LaunchJob(job(tmp_path, 9, script))) == m.Ack()
    finally:
        first.kill()
        await first.wait()
    assert first.returncode == -signal.SIGKILL
    second = await start_rnoded()
    try:
        await wait_for(lambda: len(ctl.of(m.Register)) == 2, 30)
        assert ctl.of(m.Register)[1].job_ids == (9,)
        (tmp_path / "go").touch()
        await wait_for(lambda: any(e.job_id == 9 for e in ctl.ended()))
        assert [e.state for e in ctl.ended()] == ["COMPLETED"]
        assert (tmp_path / "slurm-9.out").read_text() == "survived\n"
    finally:
        second.kill()
        await second.wait()


async def test_unanswered_ending_repeats_in_register(nursery: trio.Nursery, tmp_path: Path) -> None:
    ctl = JobController()
    ctl.forget = 1
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path / "spool")
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) == 1)
    assert await ctl.push(m.LaunchJob(job(tmp_path, 4, "exit 1\n"))) == m.Ack()
    await wait_for(lambda: len(ctl.of(m.Register)) == 2)
    first, again = ctl.of(m.Register)
    assert first.jobs_ended == ()
    assert [(e.job_id, e.state, e.exit_code) for e in again.jobs_ended] == [(4, "FAILED", 1)]
    assert len(ctl.ended()) == 1  # the beat that got the error
    await wait_for(lambda: daemon.jobs.endings() == ())  # the accepted Register acknowledged it
    beats = len(ctl.of(m.Heartbeat))
    daemon._request_beat()
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) > beats)
    assert len(ctl.ended()) == 1


async def test_register_reply_kills_a_stale_job(nursery: trio.Nursery, tmp_path: Path) -> None:
    """rnoded comes back with a job the controller has requeued elsewhere: killed, no ending."""
    ctl = JobController()
    await ctl.start(nursery)
    spool = tmp_path / "spool"
    first = make_daemon(ctl.port, spool)
    scope, stopped = trio.CancelScope(), trio.Event()
    nursery.start_soon(_run_in, scope, first, stopped)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) == 1)
    assert await ctl.push(m.LaunchJob(job(tmp_path, 8, "echo $$ > pid\nsleep 300\n"))) == m.Ack()
    scope.cancel()
    await stopped.wait()
    ctl.kill_on_register = (8,)
    second = make_daemon(ctl.port, spool)
    nursery.start_soon(second.run)
    await wait_for(lambda: len(ctl.of(m.Register)) == 2)
    assert ctl.of(m.Register)[1].job_ids == (8,)
    await wait_for(lambda: second.jobs.job_ids() == ())
    pid = int((tmp_path / "pid").read_text())
    await wait_for(lambda: not os.path.exists(f"/proc/{pid}"))
    beats = len(ctl.of(m.Heartbeat))
    second._request_beat()
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) > beats)
    assert ctl.ended() == [] and second.jobs.endings() == ()
