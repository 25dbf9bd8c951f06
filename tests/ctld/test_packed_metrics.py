"""A node's last metrics are kept packed; what snapshots show must be what the heartbeat said."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ranch.conf.build import parse_config_text
from ranch.ctld.nodes.node import NodeRecord, heartbeat_fields, metrics_record, pack_metrics
from ranch.protocol import messages as m
from ranch.statemachine.model import initial_state

CONF = "NodeName=n1 CPUs=4 RealMemory=1000\nPartitionName=p Nodes=n1\n"

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
mib = st.integers(min_value=0, max_value=2**40)

gpu = st.builds(m.GpuMetrics, index=st.integers(0, 63), util_pct=finite, memory_used_mib=mib,
                memory_total_mib=mib, temperature_c=finite, power_w=finite)
metrics = st.builds(m.Metrics, cpu_pct=finite, load_1m=finite, memory_used_mib=mib,
                    memory_total_mib=mib, max_temperature_c=st.none() | finite,
                    gpus=st.lists(gpu, max_size=16).map(tuple))


def _node() -> NodeRecord:
    cfg = parse_config_text(CONF, path="/t.conf").nodes[0]
    return NodeRecord(cfg=cfg, partitions=("p",), state=initial_state("n1", 4))


@given(metrics)
def test_snapshot_shows_the_heartbeat_figures(mt: m.Metrics) -> None:
    node = _node()
    node.metrics = pack_metrics(mt)
    node.last_heartbeat = 100.0
    rec = metrics_record(node, 102.34)
    assert rec == {
        "cpu_pct": mt.cpu_pct,
        "mem_used_mib": mt.memory_used_mib,
        "mem_total_mib": mt.memory_total_mib,
        "max_temp_c": mt.max_temperature_c,
        "gpus": [
            {"index": g.index, "util_pct": g.util_pct, "mem_used_mib": g.memory_used_mib,
             "mem_total_mib": g.memory_total_mib, "temp_c": g.temperature_c,
             "power_w": g.power_w}
            for g in mt.gpus
        ],
        "heartbeat_age_s": 2.3,
    }
    assert heartbeat_fields(node) == {
        "cpu_load": mt.load_1m,
        "free_mem": mt.memory_total_mib - mt.memory_used_mib,
        "last_heartbeat": 100.0,
    }


def test_a_node_never_heard_has_no_figures() -> None:
    node = _node()
    assert metrics_record(node, 1.0) is None
    assert heartbeat_fields(node)["cpu_load"] is None
