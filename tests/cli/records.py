"""Hand-built snapshot records (docs/internals.md shape) for the CLI's rendering tests."""

from __future__ import annotations

from types import SimpleNamespace

T0 = 1_790_000_000.0  # a fixed wall-clock time for reasons and boot times


def node(
    name: str,
    base: str = "IDLE",
    flags: tuple[str, ...] = (),
    *,
    compact: str = "idle",
    long: str = "idle",
    parts: tuple[str, ...] = ("debug",),
    cpus: int = 8,
    cpus_alloc: int = 0,
    reason: str | None = None,
    user: str | None = "alice",
    when: float = T0,
    **extra,
) -> dict:
    complete = "+".join((base, *flags))
    record = {
        "name": name,
        "hostname": name,
        "addr": f"10.0.0.{int(name[-2:]) if name[-2:].isdigit() else 1}",
        "port": None,
        "partitions": list(parts),
        "state": {
            "base": base,
            "flags": list(flags),
            "reason": None
            if reason is None
            else {"source": "ADMIN", "text": reason, "time": when, "user": user},
        },
        "compact": compact,
        "long": long,
        "complete": complete,
        "cpus": cpus,
        "cpus_alloc": cpus_alloc,
        "cpu_load": 0.25,
        "boards": 1,
        "sockets": 2,
        "cores_per_socket": cpus // 4 or 1,
        "threads_per_core": 2,
        "real_memory": 16000,
        "alloc_mem": 0,
        "free_mem": 12000,
        "tmp_disk": 1000,
        "gres": "",
        "gres_used": "",
        "features": [],
        "weight": 1,
        "boot_time": T0 - 3600,
        "slurmd_start_time": T0 - 3000,
        "last_busy": T0 - 60,
        "last_heartbeat": T0 - 5,
        "version": "0.1.0",
        "health": {"verdict": "ok", "message": "", "warnings": []},
        "metrics": None,
    }
    record.update(extra)
    return record


def part(name: str, nodes: list[str], **extra) -> dict:
    record = {
        "name": name,
        "nodes": nodes,
        "default": False,
        "state": "UP",
        "max_time": None,
        "default_time": None,
        "hidden": False,
    }
    record.update(extra)
    return record


def snapshot(nodes: list[dict], parts: list[dict], cluster: str = "test") -> SimpleNamespace:
    return SimpleNamespace(
        cluster_name=cluster, generated_at=T0, nodes=tuple(nodes), partitions=tuple(parts)
    )


def mixed_cluster() -> SimpleNamespace:
    """Nine nodes in every state the views must show, in two partitions plus a hidden one."""
    nodes = [
        node("n01"),
        node("n02"),
        node("n03", "ALLOCATED", compact="alloc", long="allocated", cpus_alloc=8),
        node("n04", "MIXED", compact="mix", long="mixed", cpus_alloc=3),
        node("n05", "IDLE", ("DRAIN",), compact="drain", long="drained", reason="bad fan"),
        node("n06", "MIXED", ("DRAIN",), compact="drng", long="draining", cpus_alloc=2,
             reason="bad fan"),
        node("n07", "DOWN", ("NO_RESPOND",), compact="down*", long="down*",
             reason="Not responding", user=None, parts=("debug", "gpu")),
        node("n08", "IDLE", ("FAIL",), compact="fail", long="fail", reason="psu", user="bob",
             parts=("gpu",)),
        node("n09", "IDLE", ("CLOUD", "POWERED_DOWN"), compact="idle~", long="idle~",
             parts=("gpu",)),
        node("n10", "FUTURE", compact="futr", long="future", parts=("gpu",)),
        node("n11", parts=("secret",)),
    ]
    parts = [
        part("debug", [f"n{i:02d}" for i in range(1, 8)], default=True, max_time=60),
        part("gpu", ["n07", "n08", "n09", "n10"], max_time=2 * 24 * 60 + 30),
        part("secret", ["n11"], hidden=True),
        part("empty", []),
    ]
    return snapshot(nodes, parts)
