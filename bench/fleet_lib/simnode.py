"""Simulated nodes: each one a trio task with its own TCP connection to rctld, speaking the real
protocol (signed frames, Register, Heartbeats with increasing seq, ConfigPush answered by Ack).

A node's life: connect, register, heartbeat every interval at a random phase; on churn it leaves
(with or without a ShutdownNotice) and rejoins; when killed it falls silent with its socket held
open, like a machine that lost power behind a switch."""

from __future__ import annotations

import random
import socket
import time
from collections import Counter

import trio

from fleet_lib.config import DEFAULT_SHAPE, FleetShape, hardware, node_name
from fleet_lib.metrics import cache_unstructured, metrics_pool
from ranch.protocol import messages as m
from ranch.protocol.errors import BUSY, BUSY_RETRY, ProtocolError
from ranch.protocol.framing import Frame, ReplayGuard
from ranch.protocol.tcp import FramedStream, PeerClosed

BAD_STATE_WORDS = ("NOT_RESPONDING", "NO_RESPOND", "DOWN")
OPENING = 4096  # connections opened and not yet registered-sent at once (see SimNode._session)
MAX_PENDING = 64  # heartbeats awaiting a reply per node before the oldest counts as lost


class RegistrationRefused(Exception):
    """The controller said no (unknown node, bad hardware): final."""


class RegistrationFailed(Exception):
    """The Register frame was refused (stale, ...) or went unanswered: try again."""


class ControllerBusy(RegistrationFailed):
    """rctld had no place for the connection (its descriptor cap): again within BUSY_RETRY."""


def bad_state(complete: str) -> bool:
    """True for a complete state string (IDLE+DRAIN, DOWN+NOT_RESPONDING) a live node must not
    have."""
    return any(word in complete for word in BAD_STATE_WORDS)


class Fleet:
    """N simulated nodes and the figures they gather."""

    def __init__(
        self,
        addr: tuple[str, int],
        key: bytes,
        nodes: int,
        interval: float,
        *,
        sources: list[str],
        shape: FleetShape = DEFAULT_SHAPE,
        message_timeout: float = 10.0,
        register_timeout: float = 60.0,
        seed: int = 1,
    ) -> None:
        self.addr = addr
        self.key = key
        self.count = nodes
        self.interval = interval
        self.sources = sources
        self.shape = shape
        self.message_timeout = message_timeout
        self.register_timeout = register_timeout
        self.rnd = random.Random(seed)
        self.pool = metrics_pool(shape)
        cache_unstructured(self.pool)
        # One guard for every connection: the replies' nonces are random, and one set is cheaper
        # than N of them.
        self.guard = ReplayGuard(window=message_timeout, max_entries=4 * nodes + 10_000)
        self.nodes = [SimNode(self, i) for i in range(1, nodes + 1)]
        self.boot_time = time.time() - 3600
        # figures
        self.registered = 0
        self.all_registered = trio.Event()
        self.last_register_at = 0.0  # perf_counter
        self.register_rtts: list[float] = []
        self.refused: Counter[str] = Counter()
        self.register_errors: Counter[str] = Counter()
        self.reregistrations = 0  # after a lost connection, not churn
        self.sources_used: set[str] = set()
        self.errors: Counter[str] = Counter()
        self.disconnects = 0
        self.busy = 0  # registrations refused for the controller's connection cap
        self.opening = trio.CapacityLimiter(OPENING)  # nodes between connect and Register sent
        self.connect_failures = 0
        self.window = 0  # tag of the steady window being recorded (0: none)
        self.hb_sent = 0
        self.hb_replied = 0
        self.hb_rtts: list[float] = []
        self.hb_lost = 0  # replies never seen (pending list overflow, counted at window end)
        self.stale_replies = 0
        self.config_pushes = 0
        self.launches = 0
        self.on_launch = lambda job_id: None  # jobs_bench records the arrival time
        self.false_down: set[str] = set()
        self.rejoin_rtts: list[float] = []
        self.rejoin_bad_state: set[str] = set()
        self.pending_at_start = 0

    def start(self, nursery: trio.Nursery) -> float:
        """Start every node at once (the registration storm); returns the perf_counter start."""
        t0 = time.perf_counter()
        for node in self.nodes:
            nursery.start_soon(node.life)
        return t0

    def open_window(self) -> None:
        self.window += 1
        self.hb_sent = self.hb_replied = self.hb_lost = 0
        self.hb_rtts = []

    def close_window(self) -> None:
        self.window = -self.window  # replies from now on are not recorded

    def unanswered(self, tag: int) -> int:
        """Heartbeats sent in window `tag` still waiting for a reply."""
        return sum(1 for n in self.nodes for (_, t) in n.pending.values() if t == tag)

    def alive_nodes(self) -> list[SimNode]:
        return [n for n in self.nodes if not n.killed and not n.churned]

    async def connect(self, src: str) -> trio.SocketStream:
        sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if len(self.sources) > 1:
                await sock.bind((src, 0))
            await sock.connect(self.addr)
        except BaseException:
            sock.close()
            raise
        self.sources_used.add(sock.getsockname()[0])
        return trio.SocketStream(sock)


class SimNode:
    """One simulated node."""

    def __init__(self, fleet: Fleet, index: int) -> None:
        self.fleet = fleet
        self.index = index
        self.name = node_name(index, fleet.count)
        self.src = fleet.sources[(index - 1) % len(fleet.sources)]
        self.seq = 0
        self.request_id = 0
        self.pending: dict[int, tuple[float, int]] = {}  # request id -> (sent at, window tag)
        self.state = ""
        self.registered = False
        self.ever_registered = False
        self.killed = False  # silent for good (mass failure)
        self.churned = False  # has left at least once (churn)
        self.leaving: str | None = None  # "graceful" | "abrupt" while asked to leave
        self.last_beat_wall = 0.0
        self.rejoin_from: float | None = None  # perf_counter of a churn rejoin's start
        self._wake: trio.CancelScope | None = None
        self._ended: BaseException | None = None
        self.hardware = hardware(self.name, index, fleet.shape)
        # Jobs are no-ops: each LaunchJob is answered with Ack and a COMPLETED ending that the
        # next heartbeat (sent at once) carries until a reply acknowledges it.
        self.ended: list[m.JobEnd] = []
        self.ended_in: dict[int, int] = {}  # heartbeat request id -> endings it carried

    def _next_id(self) -> int:
        self.request_id += 1
        return self.request_id

    # -- control from the scenario -----------------------------------------------------------

    def kill(self) -> None:
        self.killed = True  # takes effect at the next beat; the last one sent stays the last

    def leave(self, how: str) -> None:
        self.leaving = how
        self.churned = True
        if self._wake is not None:
            self._wake.cancel()

    # -- the node's task ---------------------------------------------------------------------

    async def life(self) -> None:
        fleet = self.fleet
        backoff = 0.5
        while True:
            try:
                await self._session(self.rejoin_from)
                backoff = 0.5
            except RegistrationRefused:
                return
            except ControllerBusy:
                fleet.busy += 1
                self.registered = False
                await trio.sleep(BUSY_RETRY * fleet.rnd.uniform(0.5, 1.0))  # as rnoded does
                continue
            except RegistrationFailed:
                fleet.disconnects += 1
            except (OSError, PeerClosed, trio.BrokenResourceError) as exc:
                if isinstance(exc, OSError) and not self.registered:
                    fleet.connect_failures += 1
                else:
                    fleet.disconnects += 1
                fleet.errors[type(exc).__name__] += 1
            except ProtocolError as exc:  # fatal: the stream is out of sync
                fleet.errors[exc.code] += 1
            self.registered = False
            if self.leaving is not None:
                # Offline for a moment, short of two intervals so no one should call it dead.
                await trio.sleep(fleet.rnd.uniform(0.1, 0.4) * fleet.interval)
                self.leaving = None
                self.rejoin_from = time.perf_counter()
                continue
            await trio.sleep(backoff * fleet.rnd.uniform(0.5, 1.5))
            backoff = min(backoff * 2, 10.0)

    async def _session(self, rejoin_from: float | None) -> None:
        fleet = self.fleet
        # Connect and send the Register under a slot: a real node has its own CPU and sends at
        # once, while here thousands of connections opened together would wait on this one
        # process to sign their Registers, past rctld's MessageTimeout.
        async with fleet.opening:
            stream = await fleet.connect(self.src)
            fs = FramedStream(stream, fleet.key, message_timeout=fleet.message_timeout,
                              replay_guard=fleet.guard)  # fmt: skip
            try:
                sent = await self._send_register(fs)
            except BaseException:
                await fs.aclose()
                raise
        self._ended = None
        try:
            await self._register(fs, rejoin_from, *sent)
            # A reader task and a beating task: a timer wake-up is cheap, while cancelling a
            # socket wait at every beat would cost an epoll unregister and register.
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read, fs, nursery.cancel_scope)
                await self._beat(fs)
                nursery.cancel_scope.cancel()
            if self._ended is not None:
                raise self._ended
        finally:
            await fs.aclose()

    async def _read(self, fs: FramedStream, scope: trio.CancelScope) -> None:
        try:
            while True:
                frame = await self._receive(fs)
                if frame is not None:
                    await self._handle(fs, frame)
        except (OSError, PeerClosed, ProtocolError, trio.BrokenResourceError) as exc:
            self._ended = exc  # raised by _session once the beating task is stopped too
            scope.cancel()

    async def _send_register(self, fs: FramedStream) -> tuple[int, float]:
        """Send the Register: (its request id, when)."""
        rid = self._next_id()
        msg = m.Register(name=self.name, hardware=self.hardware, boot_time=self.fleet.boot_time,
                         rnoded_version="sim-0.1")  # fmt: skip
        t0 = time.perf_counter()
        await fs.send(msg, rid)
        return rid, t0

    async def _register(self, fs: FramedStream, rejoin_from: float | None, rid: int,
                        t0: float) -> None:
        fleet = self.fleet
        with trio.move_on_after(fleet.register_timeout) as waited:
            while True:
                frame = await self._receive(fs)
                if frame is None:
                    continue
                if isinstance(frame.msg, m.RegisterReply) and frame.request_id == rid:
                    break
                if isinstance(frame.msg, m.Error) and frame.request_id == rid:
                    # A refusal of the frame (stale under load, say) is retried like rnoded
                    # does; only a RegisterReply that says no is final.
                    fleet.register_errors[frame.msg.code] += 1
                    if frame.msg.code == BUSY:
                        raise ControllerBusy(frame.msg.message)
                    raise RegistrationFailed(f"{frame.msg.code}: {frame.msg.message}")
                await self._handle(fs, frame)
        if waited.cancelled_caught:
            fleet.register_errors["timeout"] += 1
            raise RegistrationFailed(f"no RegisterReply within {fleet.register_timeout:g} s")
        reply: m.RegisterReply = frame.msg
        if not reply.accepted:
            fleet.refused[reply.reason] += 1
            raise RegistrationRefused(reply.reason)
        now = time.perf_counter()
        self.state = reply.node_state
        self.registered = True
        if not self.ever_registered:
            self.ever_registered = True
            fleet.register_rtts.append(now - t0)
            fleet.registered += 1
            fleet.last_register_at = now
            if fleet.registered == fleet.count:
                fleet.all_registered.set()
        elif rejoin_from is not None:
            fleet.rejoin_rtts.append(now - rejoin_from)
            self.rejoin_from = None
            if reply.node_state and bad_state(reply.node_state):
                fleet.rejoin_bad_state.add(self.name)
        else:
            fleet.reregistrations += 1

    async def _receive(self, fs: FramedStream) -> Frame | None:
        try:
            return await fs.receive()
        except ProtocolError as exc:
            self.fleet.errors[exc.code] += 1
            if exc.fatal:
                raise
            return None

    async def _beat(self, fs: FramedStream) -> None:
        fleet = self.fleet
        interval = fleet.interval
        next_beat = trio.current_time() + fleet.rnd.uniform(0, interval)
        while True:
            self._wake = trio.CancelScope(deadline=next_beat)
            with self._wake:
                await trio.sleep_forever()
            self._wake = None
            if self.leaving is not None:
                if self.leaving == "graceful":
                    await fs.send(m.ShutdownNotice(name=self.name, leaving=True), self._next_id())
                self.pending.clear()  # left on purpose: its unanswered beats are not "lost"
                return
            if self.killed:
                await trio.sleep_forever()  # silent, the socket held open
            await self._send_heartbeat(fs)
            now = trio.current_time()
            next_beat += interval
            if next_beat < now - interval:  # fell a whole interval behind: do not burst
                next_beat = now + interval

    async def _send_heartbeat(self, fs: FramedStream) -> None:
        fleet = self.fleet
        self.seq += 1
        rid = self._next_id()
        metrics = fleet.pool[(self.seq + self.index) % len(fleet.pool)]
        if len(self.pending) >= MAX_PENDING:
            _, tag = self.pending.pop(next(iter(self.pending)))
            if tag == fleet.window > 0:
                fleet.hb_lost += 1
        self.pending[rid] = (time.perf_counter(), fleet.window)
        if fleet.window > 0:
            fleet.hb_sent += 1
        self.last_beat_wall = time.time()
        ended = tuple(self.ended)
        if ended:
            self.ended_in[rid] = len(ended)
        await fs.send(m.Heartbeat(name=self.name, seq=self.seq, metrics=metrics,
                                  jobs_ended=ended), rid)

    async def _handle(self, fs: FramedStream, frame: Frame) -> None:
        fleet = self.fleet
        msg = frame.msg
        if isinstance(msg, m.HeartbeatReply):
            sent = self.pending.pop(frame.request_id, None)
            if sent is None:
                fleet.stale_replies += 1
            elif sent[1] == fleet.window > 0:
                fleet.hb_replied += 1
                fleet.hb_rtts.append(time.perf_counter() - sent[0])
            self.state = msg.node_state
            acked = self.ended_in.pop(frame.request_id, 0)
            if acked:
                del self.ended[:acked]  # endings are appended: the first `acked` were carried
                self.ended_in = {r: max(0, n - acked) for r, n in self.ended_in.items()}
            if bad_state(msg.node_state) and not self.killed and not self.churned:
                fleet.false_down.add(self.name)
        elif isinstance(msg, m.ConfigPush):
            fleet.config_pushes += 1
            await fs.send(m.Ack(), frame.request_id)
        elif isinstance(msg, m.LaunchJob):
            fleet.launches += 1
            spec = msg.job
            fleet.on_launch(spec.job_id)
            now = time.time()
            self.ended.append(m.JobEnd(spec.job_id, "COMPLETED", started_at=now, ended_at=now,
                                       restarts=spec.restarts))
            await fs.send(m.Ack(), frame.request_id)
            await self._send_heartbeat(fs)
        elif isinstance(msg, m.KillJob):
            await fs.send(m.Ack(), frame.request_id)  # nothing runs: nothing to kill
        elif isinstance(msg, m.Ack):
            pass  # the answer to a ShutdownNotice
        elif isinstance(msg, m.Error):
            fleet.errors[f"reply:{msg.code}"] += 1
            self.pending.pop(frame.request_id, None)
        else:
            fleet.errors[f"unexpected:{frame.type}"] += 1
