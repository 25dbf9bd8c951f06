"""rnoded's session against an in-process fake controller on 127.0.0.1 (real TCP)."""

from __future__ import annotations

import functools
import math
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from ranch.noded import cache
from ranch.noded.gpus import FakeGpus
from ranch.noded.options import NodeOptions
from ranch.noded.session import NodeDaemon, backoff_delay
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.tcp import FramedStream, PeerClosed
from tests.deadline import scaled

KEY = b"n" * 32
SETTINGS = m.NodeSettings("test", 0.05, 5.0, 2.0, None, 0.0, 5.0, ("ANY",))
FILES = (m.ConfigFile("cluster.conf", "ClusterName=test\n"),)


class FakeController:
    """Answers registrations and heartbeats, records every message as (connection no, msg)."""

    def __init__(self, settings: m.NodeSettings = SETTINGS) -> None:
        self.settings = settings
        self.config_hash = "hash-1"
        self.received: list[tuple[int, object]] = []
        self.conns: list[FramedStream] = []
        self.closed = 0  # connections the daemon closed (read to their end)
        self.refuse_registrations = 0
        self.forget_heartbeats = 0
        self.silent_conn = 0  # this connection gets no more answers, yet stays open (half-open)
        self.health_first = False  # like rctld v3: a Register without health gets health_first
        self.port = 0

    async def start(self, nursery: trio.Nursery) -> None:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, self.handle, 0, host="127.0.0.1")
        )
        self.port = listeners[0].socket.getsockname()[1]

    def of(self, cls: type) -> list:
        return [msg for _, msg in self.received if isinstance(msg, cls)]

    async def handle(self, stream: trio.SocketStream) -> None:
        fs = FramedStream(stream, KEY)
        self.conns.append(fs)
        conn = len(self.conns)
        while True:
            try:
                frame = await fs.receive()
            except (PeerClosed, ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
                self.closed += 1
                return
            self.received.append((conn, frame.msg))
            reply = None if conn == self.silent_conn else self.answer(frame.msg)
            if reply is not None:
                try:
                    await fs.send(reply, frame.request_id, frame.version)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    # the test closed this connection (aclose) between a frame and its reply
                    self.closed += 1
                    return

    def answer(self, msg: object) -> object | None:
        if isinstance(msg, m.Register):
            if self.refuse_registrations:
                self.refuse_registrations -= 1
                return m.RegisterReply(False, reason="node not in config")
            if self.health_first and msg.health is None:
                return m.RegisterReply(
                    False,
                    "health check required before registration",
                    self.settings,
                    FILES,
                    self.config_hash,
                    "UNKNOWN",
                    health_check_first=True,
                )
            return m.RegisterReply(True, "", self.settings, FILES, self.config_hash, "IDLE")
        if isinstance(msg, m.Heartbeat):
            if self.forget_heartbeats:
                self.forget_heartbeats -= 1
                return m.Error("unknown_node", f"no node {msg.name}")
            return m.HeartbeatReply("IDLE", self.config_hash)
        if isinstance(msg, m.ShutdownNotice):
            return m.Ack()
        return None

    async def push(self, settings: m.NodeSettings, config_hash: str) -> None:
        self.settings, self.config_hash = settings, config_hash
        await self.conns[-1].send(m.ConfigPush(settings, FILES, config_hash), 1000)


async def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    with trio.fail_after(scaled(timeout)):  # stretched as the machine gets busier
        while not cond():
            await trio.sleep(0.01)


def make_daemon(port: int, spool: Path, **kw: object) -> NodeDaemon:
    opts = NodeOptions(server=("127.0.0.1", port), name="n1", key=KEY, spool_dir=str(spool))
    kw.setdefault("eligible", lambda state, setting: True)
    kw.setdefault("cycle_delay", lambda name, interval: 0.0)
    return NodeDaemon(opts, FakeGpus(2, "n1", seed=1), rng=random.Random(0), **kw)  # type: ignore[arg-type]


def fake_runner(verdicts: list[str], calls: list[tuple[str, float]]) -> Callable:
    """A health runner returning the given verdicts in turn (the last one repeats)."""

    async def run(
        program: str, *, node_name: str, node_state: str, is_healthy: bool | None, timeout: float
    ) -> m.HealthReport:
        calls.append((node_state, trio.current_time()))
        verdict = verdicts[min(len(calls), len(verdicts)) - 1]
        return m.HealthReport(verdict, "" if verdict == "ok" else "HC: broken", ran_at=1.0)

    return run


async def test_register_heartbeat_and_cache(nursery: trio.Nursery, tmp_path: Path) -> None:
    ctl = FakeController()
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path)
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 3)
    (reg,) = ctl.of(m.Register)
    assert reg.name == "n1" and reg.config_hash == "" and reg.health is None
    assert reg.hardware.cpus >= 1 and reg.hardware.real_memory_mib > 0
    assert [g.name for g in reg.hardware.gpus] == ["NVIDIA H100 80GB HBM3"] * 2
    assert reg.boot_time > 0 and reg.rnoded_version
    seqs = [hb.seq for hb in ctl.of(m.Heartbeat)]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(len(hb.metrics.gpus) == 2 and hb.job_ids == () for hb in ctl.of(m.Heartbeat))
    assert daemon.node_state == "IDLE"
    cached = cache.load(str(tmp_path))
    assert cached == cache.CachedConfig(SETTINGS, FILES, "hash-1")
    assert (tmp_path / "conf-cache" / "files" / "cluster.conf").read_text() == FILES[0].text


async def test_config_push_applied_without_restart(nursery: trio.Nursery, tmp_path: Path) -> None:
    ctl = FakeController(attrs.evolve(SETTINGS, heartbeat_interval=30.0))
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path)
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) == 1)
    await ctl.push(attrs.evolve(SETTINGS, heartbeat_interval=0.02), "hash-2")
    # With the old 30 s interval no second beat would come for half a minute.
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 4)
    assert len(ctl.of(m.Ack)) == 1 and len(ctl.of(m.Register)) == 1
    assert daemon.settings is not None and daemon.settings.heartbeat_interval == 0.02
    assert cache.load(str(tmp_path)).config_hash == "hash-2"  # type: ignore[union-attr]


async def test_reconnects_after_drop(nursery: trio.Nursery, tmp_path: Path) -> None:
    ctl = FakeController()
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path)
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 2)
    await ctl.conns[0].aclose()
    await wait_for(
        lambda: any(conn == 2 and isinstance(msg, m.Heartbeat) for conn, msg in ctl.received)
    )
    regs = [(conn, msg) for conn, msg in ctl.received if isinstance(msg, m.Register)]
    assert [conn for conn, _ in regs] == [1, 2]
    assert regs[1][1].config_hash == "hash-1"  # the cached config is announced
    seqs = [hb.seq for hb in ctl.of(m.Heartbeat)]
    assert seqs == sorted(seqs)


async def test_refused_then_forgotten_registers_afresh(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    ctl = FakeController()
    ctl.refuse_registrations = 1
    ctl.forget_heartbeats = 1
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path)
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 3)
    # refused (connection closed, retried after backoff), accepted, heartbeat -> unknown_node,
    # registered again on the same connection.
    kinds = [(conn, type(msg).__name__) for conn, msg in ctl.received][:5]
    assert kinds == [
        (1, "Register"),
        (2, "Register"),
        (2, "Heartbeat"),
        (2, "Register"),
        (2, "Heartbeat"),
    ]
    assert daemon.registrations == 2


async def test_cancel_is_a_quiet_stop(nursery: trio.Nursery, tmp_path: Path) -> None:
    """A stopping daemon (SIGTERM) says nothing, as slurmd: the node and its jobs stay."""
    ctl = FakeController()
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path)
    with trio.move_on_after(5):
        async with trio.open_nursery() as inner:
            inner.start_soon(daemon.run)
            await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 1)
            inner.cancel_scope.cancel()
    await wait_for(lambda: ctl.closed == 1)  # everything rnoded sent has been read
    assert ctl.of(m.ShutdownNotice) == []


async def test_leave_says_the_node_leaves(nursery: trio.Nursery, tmp_path: Path) -> None:
    ctl = FakeController()
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path)
    with trio.move_on_after(5):
        async with trio.open_nursery() as inner:
            inner.start_soon(daemon.run)
            await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 1)
            daemon.leave("retired")
            inner.cancel_scope.cancel()
    await wait_for(lambda: len(ctl.of(m.ShutdownNotice)) == 1)
    assert ctl.of(m.ShutdownNotice)[0] == m.ShutdownNotice("n1", "retired", leaving=True)


async def test_health_verdict_change_sends_beat_at_once(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    settings = attrs.evolve(
        SETTINGS, heartbeat_interval=30.0, health_check_program="/hc", health_check_interval=0.05
    )
    ctl = FakeController(settings)
    await ctl.start(nursery)
    calls: list[tuple[str, float]] = []
    daemon = make_daemon(ctl.port, tmp_path, health_runner=fake_runner(["ok", "drain"], calls))
    nursery.start_soon(daemon.run)
    # Heartbeats are 30 s apart, so a drain report within seconds proves the beat was sent early.
    await wait_for(
        lambda: any(hb.health and hb.health.verdict == "drain" for hb in ctl.of(m.Heartbeat))
    )
    assert calls[0][0] == "IDLE"  # the node's state is handed to the program


async def test_health_not_run_when_state_not_eligible(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    settings = attrs.evolve(
        SETTINGS,
        health_check_program="/hc",
        health_check_interval=0.02,
        health_check_node_state=("ALLOC",),
    )
    ctl = FakeController(settings)
    await ctl.start(nursery)
    calls: list[tuple[str, float]] = []
    seen: list[tuple[str, tuple[str, ...]]] = []

    def eligible(state: str, setting: tuple[str, ...]) -> bool:
        seen.append((state, setting))
        return False

    daemon = make_daemon(
        ctl.port, tmp_path, health_runner=fake_runner(["ok"], calls), eligible=eligible
    )
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(seen) >= 5)
    assert len(calls) == 1  # only the first run after registration
    assert seen[-1] == ("IDLE", ("ALLOC",))


async def test_runs_from_cache_with_controller_down(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    settings = attrs.evolve(
        SETTINGS, heartbeat_interval=10.0, health_check_program="/hc", health_check_interval=60.0
    )
    cache.save(str(tmp_path), cache.CachedConfig(settings, FILES, "cached"))
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        calls: list[tuple[str, float]] = []
        daemon = make_daemon(port, tmp_path, health_runner=fake_runner(["ok"], calls))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(daemon.run)
            while len(calls) < 4:  # small virtual steps: startup work runs in threads
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    assert daemon.config_hash == "cached" and daemon.registrations == 0
    start = calls[0][1]
    assert [round(t - start) for _, t in calls] == [0, 60, 120, 180]


async def test_a_run_longer_than_the_interval_skips_missed_slots(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A check that hangs until its timeout (longer than the interval) once killed rnoded.
    settings = attrs.evolve(
        SETTINGS, heartbeat_interval=10.0, health_check_program="/hc", health_check_interval=10.0
    )
    cache.save(str(tmp_path), cache.CachedConfig(settings, FILES, "cached"))
    calls: list[tuple[str, float]] = []
    plain = fake_runner(["ok"], calls)

    async def slow(program: str, **kw: object) -> m.HealthReport:
        report = await plain(program, **kw)
        await trio.sleep(25.0)
        return report

    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        daemon = make_daemon(port, tmp_path, health_runner=slow)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(daemon.run)
            while len(calls) < 4:
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    start = calls[0][1]
    # The start-up run ends at 25, so the slots are 35, 45, 55, ...; a run from 35 to 60 missed
    # 45 and 55, so the next one waits for 65 rather than starting at once.
    assert [round(t - start) for _, t in calls] == [0, 35, 65, 95]


def test_backoff_grows_and_caps_at_two_intervals() -> None:
    rng = random.Random(1)
    delays = [backoff_delay(a, 10.0, rng) for a in range(12)]
    assert all(0 < d <= 20.0 for d in delays)
    assert delays[0] <= 1.0 and max(delays[6:]) > 10.0  # grows, with jitter below the cap
    assert math.isclose(backoff_delay(100, 0.1, rng), 0.2, rel_tol=0.5)


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


@pytest.mark.parametrize(
    ("sig", "notices"),
    [(signal.SIGTERM, []),  # a restart: the daemon stops, the node stays
     (signal.SIGUSR1, [m.ShutdownNotice("p1", "rnoded SIGUSR1: node leaving", leaving=True)])],
)
async def test_rnoded_process_stops_on_signal_and_exits_0(
    nursery: trio.Nursery, tmp_path: Path, sig: signal.Signals, notices: list
) -> None:
    ctl = FakeController()
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
        "p1",
        "--key-file",
        str(key_file),
        "--spool-dir",
        str(tmp_path / "spool"),
        "--fake-gpus",
        "1",
    ]
    root = Path(__file__).resolve().parents[2]
    async with trio.open_nursery() as inner:
        proc: trio.Process = await inner.start(
            functools.partial(
                trio.run_process, argv, cwd=root, check=False, stderr=subprocess.DEVNULL
            )
        )
        await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 2, timeout=20)
        proc.send_signal(sig)
    assert proc.returncode == 0
    await wait_for(lambda: ctl.closed == 1)
    assert ctl.of(m.ShutdownNotice) == notices


async def test_real_health_runner_reports_drain(nursery: trio.Nursery, tmp_path: Path) -> None:
    script = tmp_path / "hc.sh"
    script.write_text('#!/bin/sh\necho "disk /scratch full"\nexit 1\n')
    script.chmod(0o755)
    settings = attrs.evolve(SETTINGS, health_check_program=str(script), health_check_interval=0)
    ctl = FakeController(settings)
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path / "spool")
    nursery.start_soon(daemon.run)
    await wait_for(lambda: any(hb.health for hb in ctl.of(m.Heartbeat)))
    (report,) = [hb.health for hb in ctl.of(m.Heartbeat) if hb.health]
    assert report.verdict == "drain" and "disk /scratch full" in report.message


async def test_silent_controller_detected_within_a_few_intervals(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    # MessageTimeout is 60 s, heartbeats 0.05 s: a half-open connection must not keep the node
    # waiting a minute for a reply that never comes.
    ctl = FakeController(attrs.evolve(SETTINGS, message_timeout=60.0))
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path)
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 2)
    ctl.silent_conn = 1
    await wait_for(
        lambda: any(conn == 2 and isinstance(msg, m.Heartbeat) for conn, msg in ctl.received)
    )
    assert daemon.reply_timeout() < 60.0


async def test_hostile_config_push_does_not_kill_the_node(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    ctl = FakeController()
    await ctl.start(nursery)
    daemon = make_daemon(ctl.port, tmp_path)
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 1)
    bad = (m.ConfigFile("a\0b.conf", "x"), m.ConfigFile("", "y"))
    await ctl.conns[-1].send(m.ConfigPush(SETTINGS, bad, "hash-bad"), 1000)
    await wait_for(lambda: len(ctl.of(m.Ack)) == 1)
    beats = len(ctl.of(m.Heartbeat))
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) > beats + 2)
    assert daemon.config_hash == "hash-bad"


def test_zero_intervals_from_the_controller_are_floored(tmp_path: Path) -> None:
    daemon = make_daemon(1, tmp_path)
    daemon.settings = attrs.evolve(SETTINGS, heartbeat_interval=0.0, message_timeout=-1.0)
    assert daemon.heartbeat_interval() > 0 and daemon.message_timeout() > 0
    assert backoff_delay(5, daemon.heartbeat_interval(), random.Random(0)) > 0
    assert 0 < daemon.reply_timeout() <= daemon.message_timeout()


async def test_rnoded_sigterm_exits_0_with_controller_unreachable(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    key_file.chmod(0o600)
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        log_path = tmp_path / "rnoded.log"
        argv = [
            sys.executable,
            "-m",
            "ranch.noded",
            "--server",
            f"127.0.0.1:{port}",
            "--name",
            "u1",
            "--key-file",
            str(key_file),
            "--spool-dir",
            str(tmp_path / "spool"),
            "--fake-gpus",
            "0",
        ]
        root = Path(__file__).resolve().parents[2]
        with open(log_path, "wb") as log_file:
            proc = await trio.lowlevel.open_process(argv, cwd=root, stderr=log_file)
            try:
                await wait_for(lambda: b"cannot connect" in log_path.read_bytes(), timeout=20)
                proc.send_signal(signal.SIGTERM)
                with trio.fail_after(10):  # an overall deadline, not a timing assertion
                    await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
    assert proc.returncode == 0


async def test_health_check_first_runs_program_before_second_register(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    settings = attrs.evolve(SETTINGS, health_check_program="/hc", health_check_interval=0.0)
    ctl = FakeController(settings)
    ctl.health_first = True
    await ctl.start(nursery)
    runs: list[tuple[str, bool | None, float, int]] = []

    async def runner(
        program: str, *, node_name: str, node_state: str, is_healthy: bool | None, timeout: float
    ) -> m.HealthReport:
        runs.append((node_state, is_healthy, timeout, len(ctl.of(m.Register))))
        return m.HealthReport("drain", "HC: disk full", ran_at=1.0)

    daemon = make_daemon(ctl.port, tmp_path, health_runner=runner)  # empty spool: no cache
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 1)
    first, second = ctl.of(m.Register)
    assert first.health is None
    assert second.health == m.HealthReport("drain", "HC: disk full", ran_at=1.0)
    # One run, between the two Registers, as a node the controller does not know yet.
    assert runs == [("UNKNOWN", None, settings.health_check_timeout, 1)]
    assert [c for c, msg in ctl.received if isinstance(msg, m.Register)] == [1, 1]  # no backoff
    assert cache.load(str(tmp_path)) == cache.CachedConfig(settings, FILES, "hash-1")
