"""What a command's connection costs a trio server before rctld's own code: bare servers answer
the same signed Ping on loopback, each in a process of its own, and report their CPU per
connection (issue 50: rctld's floor, a Ping, is half of a submission's CPU).

    python bench/submit_floor.py [--connections 3000] [--rounds 2] [--paced 40] [--heap]

Servers, from least to most of rctld's path:
- c: the same steps in C (compiled here with gcc, left out without it): the kernel's part;
- blocking: the same in Python, blocking calls, no event loop: the interpreter's part;
- inline: the stdlib's accept, read, write, read the end, close, in the accept loop (no task);
- task: a trio task per connection around a trio.SocketStream, as rctld admits one;
- task+decode: that, and the request taken through a FrameDecoder (MAC, freshness, replay
  guard, codec) before the answer.
The answer is one frame encoded beforehand. The client (this process) connects, sends, reads,
half-closes and reads the end, as ranch.protocol.client does; back to back, or `--paced RATE`
connections a second (a server's CPU per request grows as requests come further apart:
docs/benchmarks.md, eleventh pass). `--heap`: the servers on the heap rctld chooses
(ranch/protocol/heap.py). Modes interleaved per round.
Prints; asserts nothing; not part of `make test`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ranch.protocol import messages as m  # noqa: E402
from ranch.protocol.framing import FrameDecoder, ReplayGuard, encode_frame  # noqa: E402

KEY = b"k" * 32
MODES = ("c", "blocking", "inline", "task", "task+decode")

# The kernel's part of a connection: accept, read, write, read the end, close, nothing else.
C_SERVER = r"""
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
static double cpu(void) { struct rusage r; getrusage(RUSAGE_SELF, &r);
  return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6
       + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6; }
int main(int argc, char **argv) {
  int n = atoi(argv[1]); FILE *f = fopen(argv[2], "rb"); char reply[4096];
  size_t len = fread(reply, 1, sizeof reply, f); fclose(f);
  int l = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in a = {0};
  a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(l, (struct sockaddr *)&a, sizeof a); listen(l, 128);
  socklen_t al = sizeof a; getsockname(l, (struct sockaddr *)&a, &al);
  printf("%d\n", ntohs(a.sin_port)); fflush(stdout);
  char buf[65536]; double t0 = 0;
  for (int i = 0; i < n; i++) {
    int c = accept(l, 0, 0); if (!i) t0 = cpu();
    read(c, buf, sizeof buf); write(c, reply, len); read(c, buf, sizeof buf); close(c);
  }
  printf("%.1f\n", (cpu() - t0) / n * 1e6); return 0;
}
"""


def build_c(scratch: Path) -> Path | None:
    """The C server, compiled into `scratch`; None where there is no gcc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    (scratch / "floor.c").write_text(C_SERVER)
    subprocess.run([gcc, "-O2", "-o", str(scratch / "floor"), str(scratch / "floor.c")],
                   check=True)
    (scratch / "reply").write_bytes(encode_frame(m.Ping(), KEY, request_id=1))
    return scratch / "floor"


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


def serve_blocking(lst: socket.socket, n: int) -> float:
    """CPU seconds per connection, the stdlib's blocking calls and no event loop."""
    reply = encode_frame(m.Ping(), KEY, request_id=1)
    t0 = 0.0
    for i in range(n):
        raw, _ = lst.accept()
        if not i:
            t0 = time.process_time()
        raw.recv(1 << 16)
        raw.sendall(reply)
        raw.recv(1 << 16)
        raw.close()
    return (time.process_time() - t0) / n


def server_main(mode: str, n: int) -> None:
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(128)
    print(lst.getsockname()[1], flush=True)
    if mode == "blocking":
        print(f"{serve_blocking(lst, n) * 1e6:.1f}", flush=True)
        return
    import trio

    lst.setblocking(False)
    print(f"{trio.run(serve, mode, lst, n) * 1e6:.1f}", flush=True)


def client(port: int, n: int, rate: float | None) -> None:
    t0 = time.perf_counter()
    for i in range(n):
        if rate:
            time.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(encode_frame(m.Ping(), KEY, request_id=1))
            s.recv(1 << 16)
            s.shutdown(socket.SHUT_WR)
            s.recv(16)


def one_run(mode: str, n: int, rate: float | None = None, heap: bool = False,
            c_server: Path | None = None) -> float:
    if mode == "c":
        assert c_server is not None
        argv = [str(c_server), str(n), str(c_server.parent / "reply")]
    else:
        argv = [sys.executable, __file__, "--serve", mode, "--connections", str(n)]
    env = None
    if heap:
        from ranch.protocol.heap import facts, plan

        libc, thp = facts()
        env = plan(os.environ, platform=sys.platform, libc=libc, thp=thp)
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    assert server.stdout is not None
    client(int(server.stdout.readline()), n, rate)
    us = float(server.stdout.readline())
    server.wait(30)
    return us


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--connections", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--paced", type=float, metavar="RATE",
                   help="connections a second (default: back to back)")
    p.add_argument("--heap", action="store_true", help="the servers on rctld's heap")
    p.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        server_main(args.serve, args.connections)
        return 0
    with tempfile.TemporaryDirectory(prefix="submit-floor-") as scratch:
        c_server = build_c(Path(scratch))
        modes = [mode for mode in MODES if mode != "c" or c_server is not None]
        got: dict[str, list[float]] = {mode: [] for mode in modes}
        for _ in range(args.rounds):
            for mode in modes:
                got[mode].append(one_run(mode, args.connections, args.paced, args.heap,
                                         c_server))
    for mode, runs in got.items():
        print(f"  {mode:<12} {' / '.join(f'{us:.0f}' for us in runs)} us CPU per connection")
    return 0


if __name__ == "__main__":
    sys.exit(main())
