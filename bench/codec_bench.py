"""Compare body codecs (stdlib json, orjson, msgpack) through cattrs for Ranch messages.

Run: `python bench/codec_bench.py`. Prints encode+decode round trips per second and body sizes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from cattrs.preconf.json import make_converter as make_json
from cattrs.preconf.msgpack import make_converter as make_msgpack
from cattrs.preconf.orjson import make_converter as make_orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranch.protocol.messages import GpuMetrics, HealthReport, Heartbeat, Metrics, Snapshot


def heartbeat() -> Heartbeat:
    gpus = tuple(GpuMetrics(i, 37.5, 20480, 81559, 48.0, 310.2) for i in range(8))
    return Heartbeat(
        name="gpu0001",
        seq=123456,
        metrics=Metrics(12.5, 3.2, 120_000, 515_000, 61.0, gpus),
        job_ids=(1001, 1002),
        health=HealthReport("ok", "", ("gpu2 at 91C",), 1.7e9),
    )


def node_record(i: int) -> dict:
    name = f"gpu{i:05d}"
    return {
        "name": name,
        "hostname": name,
        "addr": f"10.0.{i // 256}.{i % 256}",
        "port": None,
        "partitions": ["gpu", "all"],
        "state": {
            "base": "IDLE",
            "flags": ["DRAIN"],
            "reason": {
                "source": "HEALTH_CHECK",
                "text": "HC: gpu2 hot",
                "time": 1.7e9,
                "user": None,
            },
        },
        "compact": "drain",
        "long": "drained",
        "complete": "IDLE+DRAIN",
        "cpus": 128,
        "cpus_alloc": 0,
        "cpu_load": 0.35,
        "boards": 1,
        "sockets": 2,
        "cores_per_socket": 32,
        "threads_per_core": 2,
        "real_memory": 515_000,
        "alloc_mem": 0,
        "free_mem": 480_000,
        "tmp_disk": 900_000,
        "gres": "gpu:8",
        "gres_used": "gpu:0",
        "features": ["h100", "ib"],
        "weight": 1,
        "boot_time": 1.69e9,
        "slurmd_start_time": 1.69e9,
        "last_busy": 1.7e9,
        "last_heartbeat": 1.7e9,
        "version": "0.1.0",
        "health": {"verdict": "ok", "message": "", "warnings": []},
        "metrics": None,
    }


def snapshot(n: int = 10_000) -> Snapshot:
    parts = (
        {
            "name": "gpu",
            "nodes": ["gpu[00000-09999]"],
            "default": True,
            "state": "UP",
            "max_time": None,
            "default_time": None,
            "hidden": False,
        },
    )
    return Snapshot("bench", 1.7e9, tuple(node_record(i) for i in range(n)), parts)


def rate(fn: Callable[[], object], min_time: float = 0.5) -> float:
    """Calls per second of fn, measured for at least min_time seconds."""
    count, start = 0, time.perf_counter()
    while True:
        fn()
        count += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return count / elapsed


def codecs() -> dict[str, tuple[Callable[[object], bytes], Callable[[bytes, type], object]]]:
    jc, oc, mc = make_json(), make_orjson(), make_msgpack()
    return {
        "json": (lambda m: jc.dumps(m).encode(), lambda b, t: jc.loads(b, t)),
        "orjson": (oc.dumps, oc.loads),
        "msgpack": (mc.dumps, mc.loads),
    }


def main() -> None:
    hb, snap = heartbeat(), snapshot()
    print(
        f"{'codec':8} {'heartbeat rt/s':>15} {'hb bytes':>9} {'snapshot rt/s':>14} {'snap MB':>8}"
    )
    for name, (enc, dec) in codecs().items():
        hb_body, snap_body = enc(hb), enc(snap)
        assert dec(hb_body, Heartbeat) == hb and dec(snap_body, Snapshot) == snap
        hb_rate = rate(lambda e=enc, d=dec: d(e(hb), Heartbeat))
        snap_rate = rate(lambda e=enc, d=dec: d(e(snap), Snapshot), min_time=1.0)
        print(
            f"{name:8} {hb_rate:15,.0f} {len(hb_body):9} {snap_rate:14.2f} "
            f"{len(snap_body) / 1e6:8.2f}"
        )


if __name__ == "__main__":
    main()
