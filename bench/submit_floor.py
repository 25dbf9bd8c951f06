"""What a command's connection costs a trio server before rctld's own code: bare servers answer
the same signed Ping on loopback, each in a process of its own, and report their CPU per
connection (issue 50: rctld's floor, a Ping, is half of a submission's CPU).

    python bench/submit_floor.py [--connections 3000] [--rounds 2]

Servers, from least to most of rctld's path:
- inline: the stdlib's accept, read, write, read the end, close, in the accept loop (no task);
- task: a trio task per connection around a trio.SocketStream, as rctld admits one;
- task+decode: that, and the request taken through a FrameDecoder (MAC, freshness, replay
  guard, codec) before the answer.
The answer is one frame encoded beforehand. The client (this process) connects, sends, reads,
half-closes and reads the end, as ranch.protocol.client does. Modes interleaved per round.
Prints; asserts nothing; not part of `make test`.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ranch.protocol import messages as m  # noqa: E402
from ranch.protocol.framing import FrameDecoder, ReplayGuard, encode_frame  # noqa: E402

KEY = b"k" * 32
MODES = ("inline", "task", "task+decode")


async def serve(mode: str, lst: socket.socket, n: int) -> float:
    """CPU seconds per connection over `n` connections."""
    import trio

    reply = encode_frame(m.Ping(), KEY, request_id=1)
    guard = ReplayGuard(window=30)
    done, t0 = 0, 0.0

    async def one(stream: trio.SocketStream) -> None:
        nonlocal done
        data = await stream.receive_some(1 << 16)
        if mode == "task+decode":
            decoder = FrameDecoder(KEY, message_timeout=30, replay_guard=guard,
                                   unproven_max=16 << 10)
            decoder.feed(data)
            decoder.next_frame()
        await stream.send_all(reply)
        await stream.receive_some(1 << 16)
        stream.socket.close()
        done += 1

    async with trio.open_nursery() as nursery:
        while done < n:
            with trio.move_on_after(0.2):
                await trio.lowlevel.wait_readable(lst)
            while done < n:
                try:
                    raw, _ = lst.accept()
                except BlockingIOError:
                    break
                if not t0:
                    t0 = time.process_time()
                if mode == "inline":
                    raw.setblocking(True)
                    raw.recv(1 << 16)
                    raw.sendall(reply)
                    raw.recv(1 << 16)
                    raw.close()
                    done += 1
                else:
                    stream = trio.SocketStream(trio.socket.from_stdlib_socket(raw))
                    nursery.start_soon(one, stream)
            await trio.lowlevel.checkpoint()
    return (time.process_time() - t0) / n


def server_main(mode: str, n: int) -> None:
    import trio

    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(128)
    lst.setblocking(False)
    print(lst.getsockname()[1], flush=True)
    print(f"{trio.run(serve, mode, lst, n) * 1e6:.1f}", flush=True)


def client(port: int, n: int) -> None:
    for _ in range(n):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(encode_frame(m.Ping(), KEY, request_id=1))
            s.recv(1 << 16)
            s.shutdown(socket.SHUT_WR)
            s.recv(16)


def one_run(mode: str, n: int) -> float:
    server = subprocess.Popen([sys.executable, __file__, "--serve", mode, "--connections",
                               str(n)], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    client(int(server.stdout.readline()), n)
    us = float(server.stdout.readline())
    server.wait(30)
    return us


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--connections", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        server_main(args.serve, args.connections)
        return 0
    got: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            got[mode].append(one_run(mode, args.connections))
    for mode, runs in got.items():
        print(f"  {mode:<12} {' / '.join(f'{us:.0f}' for us in runs)} us CPU per connection")
    return 0


if __name__ == "__main__":
    sys.exit(main())
