"""What rctld's HTTP side costs the controller at scale: one /metrics scrape, one JSON node list,
one web-page feed, measured in-process on a Cluster of N registered nodes with live heartbeats.

    python bench/http_bench.py [--nodes 10000] [--gpus 8] [--repeat 5] [--json]

Goal (issue 15): a scrape at 10,000 nodes costs < 50 ms of controller time. "Controller time" is
the CPU the event loop spends on it; the scrape is built in chunks (ranch.ctld.web.metrics.CHUNK
nodes), and the longest chunk is what a heartbeat may wait behind, printed as `max slice`.
prometheus-client's registry (a custom collector of GaugeMetricFamily objects, the library's
documented way for exporters) is measured on the same data for comparison.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ranch.conf.build import parse_config_text
from ranch.ctld.web import grid, metrics
from ranch.protocol import messages as m
from ranch.protocol.records import node_json
from tests.ctld.harness import Harness as Cluster

GOAL_MS = 50.0


class _Conn:
    peer = "127.0.0.1:1"
    node: str | None = None

    def registered_as(self, name: str) -> None:
        self.node = name

    def push(self, msg: object) -> bool:
        return True

    def close_soon(self) -> None:
        pass


def build_cluster(nodes: int, gpus: int, seed: int = 1, history: Any = None) -> Cluster:
    width = max(5, len(str(nodes)))
    text = (
        "ClusterName=bench\nSlurmctldHost=ctl(127.0.0.1)\nHeartbeatInterval=10\n"
        "SlurmdTimeout=300\nReturnToService=2\n"
        f"NodeName=sim[{1:0{width}d}-{nodes:0{width}d}] Sockets=2 CoresPerSocket=16 "
        f"ThreadsPerCore=2 RealMemory=512000 TmpDisk=900000"
        + (f" Gres=gpu:{gpus}\n" if gpus else "\n")
        + f"PartitionName=sim Nodes=sim[{1:0{width}d}-{nodes:0{width}d}] Default=YES\n"
    )
    clock = [0.0]
    cluster = Cluster(parse_config_text(text, path="/bench.conf"), clock=lambda: clock[0],
                      wall=lambda: 1.7e9 + clock[0], history=history)
    hw_gpus = tuple(m.GpuInfo(i, "NVIDIA H100 80GB HBM3", f"GPU-{i:08x}-bench",
                              f"00000000:{i:02x}:00.0", 81559) for i in range(gpus))
    hw = m.Hardware(cpus=64, boards=1, sockets=2, cores_per_socket=16, threads_per_core=2,
                    real_memory_mib=512000, tmp_disk_mib=900000, gpus=hw_gpus)
    rnd = random.Random(seed)
    for i, name in enumerate(list(cluster.nodes)):
        conn = _Conn()
        cluster.register(m.Register(name, hw, 1.0, "0.1.0"), conn)
        g = tuple(m.GpuMetrics(j, rnd.uniform(0, 100), rnd.randrange(81559), 81559,
                               rnd.uniform(30, 80), rnd.uniform(60, 700)) for j in range(gpus))
        mt = m.Metrics(cpu_pct=rnd.uniform(0, 100), load_1m=rnd.uniform(0, 64),
                       memory_used_mib=rnd.randrange(512000), memory_total_mib=512000,
                       max_temperature_c=rnd.uniform(30, 80), gpus=g)
        cluster.heartbeat(m.Heartbeat(name, 1, mt), conn)
        if i % 97 == 0:
            cluster.update_nodes(m.UpdateNodes(name, "DRAIN", "bench: bad DIMM", "alice"))
    return cluster


def _client_text(cluster: Cluster) -> str:
    """The same per-node families through prometheus-client's registry."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    from ranch.statemachine import names

    class Collector:
        def collect(self):  # prometheus-client calls it per scrape
            fams = {k: GaugeMetricFamily(k, k, labels=labels) for k, labels in (
                ("slurm_node_cpus", ["node"]), ("slurm_node_cpus_alloc", ["node"]),
                ("slurm_node_memory_bytes", ["node"]),
                ("slurm_node_memory_free_bytes", ["node"]),
                ("slurm_node_cpu_total", ["node", "status"]),
                ("ranch_node_state", ["node", "state", "reason_source"]),
                ("DCGM_FI_DEV_GPU_UTIL", ["gpu", "UUID", "modelName", "Hostname"]),
                ("DCGM_FI_DEV_GPU_TEMP", ["gpu", "UUID", "modelName", "Hostname"]),
                ("DCGM_FI_DEV_FB_USED", ["gpu", "UUID", "modelName", "Hostname"]))}
            for node in cluster.nodes.values():
                name, st, cfg = node.cfg.name, node.state, node.cfg
                long_name = names.long(st)
                fams["slurm_node_cpus"].add_metric([name], cfg.cpus)
                fams["slurm_node_cpus_alloc"].add_metric([name], st.cpus_alloc)
                fams["slurm_node_memory_bytes"].add_metric([name], cfg.real_memory * 1048576)
                fams["slurm_node_cpu_total"].add_metric([name, long_name], cfg.cpus)
                fams["ranch_node_state"].add_metric(
                    [name, long_name, st.reason.source.name.lower() if st.reason else ""], 1)
                mt = node.metrics
                if mt is None:
                    continue
                fams["slurm_node_memory_free_bytes"].add_metric(
                    [name], (mt[3] - mt[2]) * 1048576)
                for k in range(5, len(mt), 6):
                    labels = [str(int(mt[k])), f"GPU-{int(mt[k]):08x}-bench",
                              "NVIDIA H100 80GB HBM3", name]
                    fams["DCGM_FI_DEV_GPU_UTIL"].add_metric(labels, mt[k + 1])
                    fams["DCGM_FI_DEV_GPU_TEMP"].add_metric(labels, mt[k + 4])
                    fams["DCGM_FI_DEV_FB_USED"].add_metric(labels, mt[k + 2])
            yield from fams.values()

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return generate_latest(registry).decode()


def _timed(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        result = fn()
        best = min(best, time.process_time() - t0)
    return best * 1000, result


def _scrape(cluster: Cluster, expo: metrics.Exposition) -> tuple[str, float]:
    """One scrape as the route runs it: the chunks, timing the longest."""
    out: list[bytes] = []
    longest = 0.0
    t0 = time.process_time()
    for _ in expo.steps(cluster.nodes, out):
        t1 = time.process_time()
        longest = max(longest, t1 - t0)
        t0 = t1
    longest = max(longest, time.process_time() - t0)
    return b"".join(out).decode(), longest * 1000  # the route sends the pieces as they are


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-client", action="store_true", help="skip prometheus-client's run")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cluster = build_cluster(args.nodes, args.gpus)
    setup_s = time.perf_counter() - t0
    gc.collect()
    gc.freeze()

    expo = metrics.Exposition()
    first_ms, _ = _timed(lambda: expo.render(cluster.nodes), 1)  # builds the per-node lines
    slices: list[float] = []

    def scrape() -> list[bytes]:
        # A new heartbeat on every node between scrapes: nothing per-heartbeat is reused.
        for node in cluster.nodes.values():
            if node.metrics is not None:
                node.metrics = node.metrics[:]  # same figures, a new packed array
        out: list[bytes] = []
        for _ in expo.steps(cluster.nodes, out):
            pass
        return out  # what the route sends, piece by piece

    scrape_ms, _ = _timed(scrape, args.repeat)
    for _ in range(args.repeat):
        text, longest = _scrape(cluster, expo)
        slices.append(longest)
    assert isinstance(text, str)

    def state_change_scrape() -> str:
        node = next(iter(cluster.nodes.values()))
        cluster.update_nodes(m.UpdateNodes(node.cfg.name, "DRAIN" if "DRAIN" not in
                                           node.complete else "RESUME", "bench", "bob"))
        return expo.render(cluster.nodes)

    changed_ms, _ = _timed(state_change_scrape, args.repeat)
    node = next(iter(cluster.nodes.values()))
    cluster.update_nodes(m.UpdateNodes(node.cfg.name, "DRAIN" if "DRAIN" not in node.complete
                                       else "RESUME", "bench", "bob"))
    _, changed_slice = _scrape(cluster, expo)
    snap = cluster.snapshot(metrics=True)
    api_ms, _ = _timed(lambda: [node_json(n) for n in snap.nodes], args.repeat)
    feed = grid.Feed()

    def feed_build() -> bytes:  # the page's feed, built whole (the app checkpoints per chunk)
        for _ in feed.steps(object(), cluster.nodes, [p.name for p in cluster.config.partitions],
                            cluster.config.cluster_name, time.time()):
            pass
        return feed.body(False)

    feed_ms, feed_body = _timed(feed_build, 1)
    figures = {
        "nodes": args.nodes,
        "gpus_per_node": args.gpus,
        "setup_s": round(setup_s, 1),
        "metrics_bytes": len(text),
        "metrics_series": text.count("\n") - 2 * text.count("# TYPE"),
        "metrics_first_ms": round(first_ms, 1),
        "metrics_scrape_ms": round(scrape_ms, 1),
        "metrics_max_slice_ms": round(min(slices), 1),
        "metrics_after_state_change_ms": round(changed_ms, 1),
        "metrics_max_slice_after_change_ms": round(changed_slice, 1),
        "api_nodes_json_ms": round(api_ms, 1),
        "page_feed_ms": round(feed_ms, 1),
        "page_feed_bytes": len(feed_body) if isinstance(feed_body, bytes) else 0,
        "goal_ms": GOAL_MS,
    }
    if not args.skip_client:
        client_ms, client_text = _timed(lambda: _client_text(cluster), 1)
        figures["prometheus_client_ms"] = round(client_ms, 1)
        figures["prometheus_client_bytes"] = len(client_text)  # type: ignore[arg-type]
    figures["goal_met"] = figures["metrics_scrape_ms"] < GOAL_MS
    if args.json:
        print(json.dumps(figures))
    else:
        width = max(map(len, figures))
        for k, v in figures.items():
            print(f"{k:<{width}}  {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
