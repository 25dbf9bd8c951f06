"""The /metrics text built in-process: valid exposition format, one group per family, escaping,
and the cached per-node lines following state changes."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from ranch.ctld.web.metrics import Exposition, escape
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster
from tests.ctld.helpers import make_config, register


def _cluster() -> Cluster:
    wall = [1.7e9]
    cluster = Cluster(make_config(), clock=lambda: 0.0, wall=lambda: wall[0])
    for name in ("n1", "n2", "n3"):
        _, conn = register(cluster, name)
        gpus = (m.GpuMetrics(0, 55.6, 1000, 16000, 61.2, 200.0),
                m.GpuMetrics(1, 3.2, 0, 16000, 40.0, 90.0))
        cluster.heartbeat(m.Heartbeat(name, 1, m.Metrics(
            cpu_pct=5.0, load_1m=0.1, memory_used_mib=100, memory_total_mib=1000, gpus=gpus)),
            conn)
    return cluster


def _groups(text: str) -> list[str]:
    """Family name of each sample line, in order (a family's lines must be one run)."""
    names = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.append(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0))
    return names


def test_text_parses_and_each_family_is_one_group() -> None:
    cluster = _cluster()
    text = Exposition().render(cluster.nodes)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    runs = [n for i, n in enumerate(_groups(text)) if i == 0 or _groups(text)[i - 1] != n]
    assert len(runs) == len(set(runs)), "a family's samples are split"
    types = re.findall(r"^# TYPE (\S+) gauge$", text, re.M)
    assert len(types) == len(set(types))
    util = {s.labels["Hostname"] + "/" + s.labels["gpu"]: s.value
            for s in fams["DCGM_FI_DEV_GPU_UTIL"].samples}
    assert util == {"n1/0": 55, "n1/1": 3, "n2/0": 55, "n2/1": 3, "n3/0": 55, "n3/1": 3}
    first = fams["DCGM_FI_DEV_FB_USED"].samples[0]
    assert first.labels == {"gpu": "0", "UUID": "GPU-0", "modelName": "Fake", "Hostname": "n1"}
    assert first.value == 1000
    assert [s.value for s in fams["slurm_node_memory_free_bytes"].samples] == [900 << 20] * 3
    assert [s.labels["node"] for s in fams["slurm_node_cpus"].samples] == ["n1", "n2", "n3", "n4"]


def test_state_changes_show_in_the_next_scrape_and_reasons_are_escaped() -> None:
    cluster = _cluster()
    expo = Exposition()
    before = expo.render(cluster.nodes)
    assert 'ranch_node_state{node="n2",state="idle",reason_source=""} 1' in before
    reason = 'PSU "B" says\\ no\nreally'
    cluster.update_nodes(m.UpdateNodes("n2", "DRAIN", reason, "ops"))
    after = expo.render(cluster.nodes)
    assert 'ranch_node_state{node="n2",state="drained",reason_source="admin"} 1' in after
    assert 'slurm_node_cpu_other{node="n2",status="drained"} 4' in after
    assert "slurm_nodes_drain 1\n" in after and "slurm_nodes_drained 1\n" in after
    fams = {f.name: f for f in text_string_to_metric_families(after)}
    (sample,) = fams["ranch_node_reason_timestamp_seconds"].samples
    assert sample.labels["reason"] == reason and sample.labels["user"] == "ops"
    assert escape('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    # n4 never registered: counted, no heartbeat figures.
    assert 'slurm_node_memory_free_bytes{node="n4"}' not in after
    assert "slurm_nodes 4\n" in after


def test_chunks_let_the_loop_run_between_them() -> None:
    cluster = _cluster()
    out: list[bytes] = []
    steps = sum(1 for _ in Exposition().steps(cluster.nodes, out))
    assert steps >= 1 and b"".join(out).startswith(b"# HELP slurm_nodes ")


