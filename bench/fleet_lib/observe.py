"""What the controller says: snapshots through ranch.protocol.client (in a thread, so the nodes keep
beating), node-state predicates, and CLI commands timed as subprocesses."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable

import trio

from ranch.protocol import client, typedclient
from ranch.protocol.messages import Error, GetSnapshot, Snapshot

SNAPSHOT_TIMEOUT = 60.0


def flags(node: dict) -> list[str]:
    return list(node.get("state", {}).get("flags", ()))


def base(node: dict) -> str:
    return node.get("state", {}).get("base", "")


def no_respond(node: dict) -> bool:
    return "NO_RESPOND" in flags(node)


def down(node: dict) -> bool:
    return base(node) == "DOWN"


def idle(node: dict) -> bool:
    return base(node) == "IDLE" and not flags(node)


def reason_time(node: dict) -> float | None:
    reason = node.get("state", {}).get("reason")
    return None if not reason else reason.get("time")


async def snapshot(addr: tuple[str, int], key: bytes) -> tuple[Snapshot, float]:
    """A snapshot and the wall-clock time (epoch) its reply arrived."""

    def fetch() -> Snapshot:
        reply = typedclient.request(addr, key, GetSnapshot(), timeout=SNAPSHOT_TIMEOUT)
        if isinstance(reply, Error):
            raise RuntimeError(f"GetSnapshot refused: {reply.code}: {reply.message}")
        if not isinstance(reply, Snapshot):
            raise RuntimeError(f"GetSnapshot answered with {type(reply).__name__}")
        return reply

    snap = await trio.to_thread.run_sync(fetch)
    return snap, time.time()


async def wait_for(
    addr: tuple[str, int],
    key: bytes,
    done: Callable[[Snapshot, float], bool],
    *,
    timeout: float,
    gap: float = 0.2,
) -> tuple[bool, Snapshot | None]:
    """Poll snapshots until `done(snapshot, received_at)` is true: at most one per `gap` s, and
    never more than a third of the time, so that serving snapshots to the observer does not
    become the controller's main work (a 10,000-node snapshot is about 6 MB)."""
    deadline = trio.current_time() + timeout
    snap = None
    while trio.current_time() < deadline:
        started = trio.current_time()
        try:
            snap, at = await snapshot(addr, key)
        except (client.ControllerUnreachable, RuntimeError):
            await trio.sleep(gap)
            continue
        if done(snap, at):
            return True, snap
        took = trio.current_time() - started
        await trio.sleep(max(gap - took, 2 * took))
    return False, snap


def names_where(snap: Snapshot, pred: Callable[[dict], bool], among: Iterable[str] | None = None):
    wanted = None if among is None else set(among)
    return {n["name"] for n in snap.nodes if (wanted is None or n["name"] in wanted) and pred(n)}


async def time_command(
    argv: list[str], env: dict[str, str], runs: int = 3, gap: float = 1.5
) -> dict:
    """Run a command `runs` times, `gap` s apart; wall seconds (min, median, max), output size,
    exit status. The gap outlasts the controller's snapshot cache (1 s for heartbeat-only
    figures), so each run pays what an admin typing the command in steady state pays."""
    walls: list[float] = []
    out_bytes = 0
    status = 0
    for i in range(runs):
        if i:
            await trio.sleep(gap)
        t0 = time.perf_counter()
        proc = await trio.run_process(argv, env=env, capture_stdout=True, capture_stderr=True,
                                      check=False)  # fmt: skip
        walls.append(time.perf_counter() - t0)
        out_bytes = len(proc.stdout)
        status = proc.returncode
        if status != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
            return {"ok": False, "status": status, "stderr": " | ".join(err), "walls": walls}
    walls.sort()
    return {"ok": True, "status": status, "min": walls[0], "median": walls[len(walls) // 2],
            "max": walls[-1], "bytes": out_bytes, "walls": walls}  # fmt: skip


def cli_env(repo_root: str, addr: tuple[str, int], key_path: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (repo_root, env.get("PYTHONPATH"))))
    env["RANCH_KEY_FILE"] = key_path
    env["RANCH_SERVER"] = f"{addr[0]}:{addr[1]}"
    return env


def python() -> str:
    return sys.executable
