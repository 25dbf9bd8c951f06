"""One process of bench/fleet_relay.py: simulated relays, each carrying its share of simulated
nodes to rctld over one connection, as a relay rnoded does (RelayUp batches of frames each node
signed with its own key; RelayDown's replies checked with that key). No per-node socket and no
per-node task: a process of a few thousand nodes holds a handful of descriptors.

Progress goes to stdout as one JSON object per line, every REPORT seconds."""

from __future__ import annotations

import hashlib
import heapq
import json
import random
import sys
import time

import trio

from fleet_lib.config import DEFAULT_SHAPE, hardware, node_name
from fleet_lib.metrics import cache_unstructured, metrics_pool
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import FrameDecoder, ReplayGuard, encode_frame
from ranch.protocol.relaymessages import node_key
from ranch.protocol.tcp import FramedStream

REPORT = 0.5
BATCH = 100  # frames per RelayUp (about 250 KiB of Registers, as a relay rnoded sends)
FLUSH = 0.02
OUTSTANDING = 150  # registrations in flight per relay: a storm paced to what rctld takes in
BAD = ("DOWN", "NOT_RESPONDING")


def credential(name: str) -> str:
    """The credential every simulated node holds (bench/fleet_relay.py files their digests)."""
    return f"bench-credential-{name}"


def digest(name: str) -> str:
    return hashlib.sha256(credential(name).encode()).hexdigest()


class Figures:
    def __init__(self) -> None:
        self.registered = 0
        self.refused = 0
        self.gone = 0
        self.hb_sent = 0
        self.hb_replied = 0
        self.bad: set[str] = set()
        self.errors: dict[str, int] = {}

    def doc(self) -> dict[str, object]:
        return {"registered": self.registered, "refused": self.refused, "gone": self.gone,
                "hb_sent": self.hb_sent, "hb_replied": self.hb_replied,
                "bad": sorted(self.bad), "errors": self.errors, "t": time.time()}


class SimRelay:
    """One simulated relay and its nodes."""

    def __init__(self, name: str, indices: range, count: int, addr: tuple[str, int],
                 key: bytes, interval: float, figures: Figures, guard: ReplayGuard,
                 pool: tuple[m.Metrics, ...], rnd: random.Random) -> None:
        self.name = name
        self.addr = addr
        self.key = key
        self.interval = interval
        self.fig = figures
        self.pool = pool
        self.rnd = rnd
        self.names = [node_name(i, count) for i in indices]
        self.index = dict(zip(self.names, indices, strict=True))
        self.keys = {n: node_key(credential(n)) for n in self.names}
        self.decoders = {n: FrameDecoder(self.keys[n], replay_guard=guard, message_timeout=60)
                         for n in self.names}
        self.registered: set[str] = set()
        self.to_register: list[str] = list(self.names)
        self.in_flight = 0
        self.seq = 0
        self.pending: list[m.RelayItem] = []
        self.wake = trio.Event()
        self.beats: list[tuple[float, str]] = []  # (when, node), a heap

    async def run(self) -> None:
        stream = await trio.open_tcp_stream(*self.addr)
        fs = FramedStream(stream, self.key, message_timeout=60)
        await fs.send(m.RelayUp(self.name), 0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._flusher, fs)
            nursery.start_soon(self._beater)
            self._register_more()
            while True:
                frame = await fs.receive()
                if isinstance(frame.msg, m.RelayDown):
                    self._down(frame.msg)

    def _send(self, node: str, msg: object) -> None:
        frame = encode_frame(msg, self.keys[node], request_id=1)
        self.pending.append(m.RelayItem(node, frame))
        self.wake.set()

    def _register_more(self) -> None:
        while self.to_register and self.in_flight < OUTSTANDING:
            name = self.to_register.pop()
            self.in_flight += 1
            self._send(name, m.Register(name, hardware(name, self.index[name], DEFAULT_SHAPE),
                                        time.time() - 3600, "fleet-relay", node_credential=None))

    def _down(self, msg: m.RelayDown) -> None:
        for item in msg.items:
            name = item.node
            if item.gone:
                self.fig.gone += 1
                if name in self.registered:
                    self.registered.discard(name)
                    self.fig.registered -= 1
                else:
                    self.in_flight -= 1
                self.to_register.append(name)
                continue
            dec = self.decoders.get(name)
            if dec is None:
                continue
            dec.feed(item.frame)
            try:
                for frame in dec:
                    self._reply(name, frame.msg)
            except ProtocolError as exc:
                self.fig.errors[exc.code] = self.fig.errors.get(exc.code, 0) + 1
        self._register_more()

    def _reply(self, name: str, msg: object) -> None:
        if isinstance(msg, m.RegisterReply):
            self.in_flight -= 1
            if msg.accepted:
                self.registered.add(name)
                self.fig.registered += 1
                heapq.heappush(self.beats, (time.monotonic() + self.rnd.uniform(
                    0, self.interval), name))
            else:
                self.fig.refused += 1
        elif isinstance(msg, m.HeartbeatReply):
            self.fig.hb_replied += 1
            if any(word in msg.node_state for word in BAD):
                self.fig.bad.add(name)
        elif isinstance(msg, m.Error):
            self.fig.errors[msg.code] = self.fig.errors.get(msg.code, 0) + 1

    async def _beater(self) -> None:
        while True:
            now = time.monotonic()
            while self.beats and self.beats[0][0] <= now:
                _, name = heapq.heappop(self.beats)
                if name not in self.registered:
                    continue
                self.seq += 1
                self._send(name, m.Heartbeat(name, self.seq, self.pool[self.seq % len(
                    self.pool)]))
                self.fig.hb_sent += 1
                heapq.heappush(self.beats, (now + self.interval, name))
            await trio.sleep(0.05)

    async def _flusher(self, fs: FramedStream) -> None:
        while True:
            await self.wake.wait()
            self.wake = trio.Event()
            await trio.sleep(FLUSH)
            while self.pending:
                items = tuple(self.pending[:BATCH])
                del self.pending[:BATCH]
                await fs.send(m.RelayUp(self.name, items, time.time()), 0)


async def main(first: int, last: int, count: int, per_relay: int, addr: tuple[str, int],
               key: bytes, interval: float, seed: int) -> None:
    fig = Figures()
    pool = metrics_pool(DEFAULT_SHAPE)
    cache_unstructured(pool)
    guard = ReplayGuard(window=60, max_entries=8 * (last - first + 1) + 10_000)
    rnd = random.Random(seed)
    relays = [SimRelay(f"relay{start:06d}", range(start, min(start + per_relay, last + 1)),
                       count, addr, key, interval, fig, guard, pool, rnd)
              for start in range(first, last + 1, per_relay)]
    async with trio.open_nursery() as nursery:
        for relay in relays:
            nursery.start_soon(relay.run)
        while True:
            print(json.dumps(fig.doc()), flush=True)
            await trio.sleep(REPORT)


def run(argv: list[str]) -> None:
    first, last, count, per_relay, port, interval, seed = map(int, argv[:7])
    key = bytes.fromhex(sys.stdin.readline().strip())
    trio.run(main, first, last, count, per_relay, ("127.0.0.1", port), key, float(interval),
             seed)
