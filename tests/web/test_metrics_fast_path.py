"""The per-heartbeat families of /metrics (free memory, dcgm-exporter's GPU series) come out of
per-chunk bytes templates; they must equal a plain line-by-line rendering of the same node
records, scrape after scrape, while nodes re-register with other GPUs, change state and send
new figures (the templates' cache follows them)."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.conf.build import parse_config_text
from ranch.ctld.nodes.node import unpack_gpus
from ranch.ctld.web import metrics
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster
from tests.ctld.helpers import FakeConn

NODES = 7
CONF = f"""\
ClusterName=fast
SlurmctldHost=ctl(127.0.0.1)
HeartbeatInterval=10
SlurmdTimeout=60
ReturnToService=2
NodeName=n[1-{NODES}] CPUs=4 RealMemory=1000 TmpDisk=100
PartitionName=main Nodes=n[1-{NODES}] Default=YES
"""
MIB = 1 << 20


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def reference(cluster: Cluster) -> str:
    """The per-heartbeat families written the plain way, one line at a time."""
    free = ["# HELP slurm_node_memory_free_bytes Free memory in bytes of the node\n"
            "# TYPE slurm_node_memory_free_bytes gauge\n"]
    fams: dict[str, list[str]] = {
        "DCGM_FI_DEV_GPU_UTIL": ["GPU utilization (in %).", "util_pct"],
        "DCGM_FI_DEV_GPU_TEMP": ["GPU temperature (in C).", "temp_c"],
        "DCGM_FI_DEV_FB_USED": ["Framebuffer memory used (in MiB).", "mem_used_mib"],
    }
    lines: dict[str, list[str]] = {k: [] for k in fams}
    for node in cluster.nodes.values():
        if node.metrics is None:
            continue
        name = _esc(node.name)
        free.append(f'slurm_node_memory_free_bytes{{node="{name}"}} '
                    f"{(int(node.metrics[3]) - int(node.metrics[2])) * MIB}\n")
        infos = orjson.loads(node.hardware.json())["gpus"] if node.hardware else []
        for i, gpu in enumerate(unpack_gpus(node.metrics)):
            info: dict[str, Any] = infos[i] if i < len(infos) else {}
            labels = (f'gpu="{info.get("index", i)}",UUID="{_esc(str(info.get("uuid", "")))}",'
                      f'modelName="{_esc(str(info.get("name", "")))}",Hostname="{name}"')
            for fam, (_, key) in fams.items():
                lines[fam].append(f"{fam}{{{labels}}} {int(gpu[key])}\n")
    out = free
    for fam, (help_text, _) in fams.items():
        out.append(f"# HELP {fam} {help_text}\n# TYPE {fam} gauge\n")
        out.extend(lines[fam])
    return "".join(out)


labels_text = st.text(alphabet=st.sampled_from('aZ09 -%"\\\né%d'), max_size=8)
gpu_info = st.tuples(labels_text, labels_text)  # (model name, uuid)
gpu_figures = st.tuples(st.floats(-5, 1000, allow_nan=False), st.integers(0, 200_000),
                        st.floats(-20, 150, allow_nan=False))
action = st.one_of(
    st.none(),
    st.tuples(st.just("beat"), st.integers(0, 2000), st.lists(gpu_figures, max_size=4)),
    st.tuples(st.just("register"), st.lists(gpu_info, max_size=4)),
    st.tuples(st.just("drain"), labels_text),
)
rounds = st.lists(st.lists(action, min_size=NODES, max_size=NODES), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(rounds=rounds, chunk=st.integers(1, NODES + 1))
def test_fast_path_equals_a_plain_rendering(rounds: list[list[Any]], chunk: int) -> None:
    cluster = Cluster(parse_config_text(CONF, path="/fast.conf"), clock=lambda: 0.0,
                      wall=lambda: 1.7e9)
    conns: dict[str, FakeConn] = {}
    seqs: dict[str, int] = {}
    expo = metrics.Exposition()
    saved, metrics.CHUNK = metrics.CHUNK, chunk
    try:
        for acts in rounds:
            for name, act in zip(list(cluster.nodes), acts, strict=True):
                _apply(cluster, name, act, conns, seqs)
            text = expo.render(cluster.nodes)
            start = text.index("# HELP slurm_node_memory_free_bytes ")
            assert text[start:] == reference(cluster)
            assert text[:start] == metrics.Exposition().render(cluster.nodes)[:start]
    finally:
        metrics.CHUNK = saved


def _apply(cluster: Cluster, name: str, act: Any, conns: dict[str, FakeConn],
           seqs: dict[str, int]) -> None:
    if act is None:
        return
    if act[0] == "register" or (act[0] == "beat" and name not in conns):
        infos = act[1] if act[0] == "register" else []
        hw = m.Hardware(cpus=4, boards=1, sockets=1, cores_per_socket=4, threads_per_core=1,
                        real_memory_mib=1000, tmp_disk_mib=100,
                        gpus=tuple(m.GpuInfo(i, model, uuid, f"0000:{i:02x}:00.0", 16000)
                                   for i, (model, uuid) in enumerate(infos)))
        conns[name] = FakeConn()
        cluster.register(m.Register(name, hw, 1.0, "0.1.0"), conns[name])
    if act[0] == "beat":
        seqs[name] = seqs.get(name, 0) + 1
        gpus = tuple(m.GpuMetrics(i, util, used, 200_000, temp, 100.0)
                     for i, (util, used, temp) in enumerate(act[2]))
        cluster.heartbeat(m.Heartbeat(name, seqs[name], m.Metrics(
            cpu_pct=1.0, load_1m=0.0, memory_used_mib=act[1], memory_total_mib=2000,
            gpus=gpus)), conns[name])
    elif act[0] == "drain":
        cluster.update_nodes(m.UpdateNodes(name, "DRAIN", act[1] or "why", "ops"))


def test_a_percent_sign_in_a_label_is_written_as_it_is() -> None:
    cluster = Cluster(parse_config_text(CONF, path="/fast.conf"), clock=lambda: 0.0,
                      wall=lambda: 1.7e9)
    conns: dict[str, FakeConn] = {}
    _apply(cluster, "n1", ("register", [("A100 %d 100%", "GPU-%s")]), conns, {})
    _apply(cluster, "n1", ("beat", 500, [(99.9, 7, 41.5)]), conns, {})
    text = metrics.Exposition().render(cluster.nodes)
    assert ('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-%s",modelName="A100 %d 100%",'
            'Hostname="n1"} 99\n') in text
    assert 'slurm_node_memory_free_bytes{node="n1"} 1572864000\n' in text
    assert text.endswith(reference(cluster))
