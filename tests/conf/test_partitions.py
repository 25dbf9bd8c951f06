"""PartitionName lines: golden records, DEFAULT accumulation, Nodes forms, validation."""

import pytest

from ranch.conf.build import parse_config_text
from ranch.conf.model import PartitionConfig

from .helpers import one_error

NODES = "NodeName=c[1-4]\nNodeName=g[1-2]\n"


def test_partition_golden() -> None:
    cfg = parse_config_text(
        NODES + "PartitionName=batch Nodes=g[1-2],c[1-2] Default=YES MaxTime=1-00:00:00 "
        "DefaultTime=30 State=DRAIN Hidden=YES AllowGroups=hpc,admin PriorityTier=2\n")
    assert cfg.partitions == (PartitionConfig(
        name="batch", nodes=("c1", "c2", "g1", "g2"), default=True, state="DRAIN",
        max_time=1440, default_time=30, hidden=True,
        options=(("AllowGroups", "hpc,admin"), ("PriorityTier", "2"))),)
    assert cfg.partitions_of("g1") == ("batch",)
    assert cfg.partitions_of("c4") == ()
    assert cfg.default_partition is cfg.partitions[0]


def test_partition_defaults() -> None:
    (p,) = parse_config_text(NODES + "PartitionName=p\n").partitions
    assert (p.nodes, p.default, p.state, p.max_time, p.default_time, p.hidden) == (
        (), False, "UP", None, None, False)


def test_nodes_all_and_empty() -> None:
    cfg = parse_config_text(NODES + 'PartitionName=all Nodes=ALL\nPartitionName=none Nodes=""\n')
    assert cfg.partitions[0].nodes == ("c1", "c2", "c3", "c4", "g1", "g2")
    assert cfg.partitions[1].nodes == ()
    assert cfg.partitions_of("c3") == ("all",)


def test_nodeset_by_name_and_feature() -> None:
    cfg = parse_config_text(
        "NodeName=a[1-3] Features=fast\nNodeName=b[1-2]\n"
        "NodeSet=fastset Feature=fast\nNodeSet=bset Nodes=b[1-2]\n"
        "PartitionName=p Nodes=fastset\nPartitionName=q Nodes=bset,a1\n")
    assert cfg.partitions[0].nodes == ("a1", "a2", "a3")
    assert cfg.partitions[1].nodes == ("a1", "b1", "b2")


@pytest.mark.parametrize(
    ("text", "max_time"),
    [("30", 30), ("10:00", 10), ("02:00:00", 120), ("3-12", 5040), ("1-2:30", 1590),
     ("1-0:0:30", 1441), ("UNLIMITED", None), ("INFINITE", None)],
)
def test_max_time_forms(text: str, max_time: int | None) -> None:
    (p,) = parse_config_text(NODES + f"PartitionName=p MaxTime={text}\n").partitions
    assert p.max_time == max_time


def test_partition_default_lines_accumulate() -> None:
    cfg = parse_config_text(
        NODES + "PartitionName=DEFAULT MaxTime=60 State=DOWN\nPartitionName=a\n"
        "PartitionName=DEFAULT Hidden=YES\nPartitionName=b State=UP\n")
    assert [(p.name, p.max_time, p.state, p.hidden) for p in cfg.partitions] == [
        ("a", 60, "DOWN", False), ("b", 60, "UP", True)]


def test_nodes_appear_in_config_order_once() -> None:
    (p,) = parse_config_text(NODES + "PartitionName=p Nodes=g2,c[3-4],g2,c1,c2\n").partitions
    assert p.nodes == ("c1", "c2", "c3", "c4", "g2")


def test_later_default_yes_wins_with_warning() -> None:
    cfg = parse_config_text(NODES + "PartitionName=a Default=YES\nPartitionName=b Default=YES\n")
    assert [p.default for p in cfg.partitions] == [False, True]
    assert "replaces 'a'" in cfg.warnings[0].message


def test_partition_naming_undefined_node() -> None:
    e = one_error(NODES + "PartitionName=p Nodes=c[1-2],x[1-3]\n")
    assert (e.line, e.col) == (3, 30)
    assert "x1, x2, x3 not defined" in e.message


def test_partition_bad_time() -> None:
    e = one_error(NODES + "PartitionName=p MaxTime=1-25:00:00x\n")
    assert (e.line, e.col) == (3, 25) and "invalid time" in e.message


@pytest.mark.parametrize(
    ("line", "col", "needle"),
    [("PartitionName=p State=OPEN", 23, "UP DOWN DRAIN INACTIVE"),
     ("PartitionName=p Default=maybe", 25, "not YES or NO")],
)
def test_partition_bad_values(line: str, col: int, needle: str) -> None:
    e = one_error(NODES + line + "\n")
    assert (e.line, e.col) == (3, col) and needle in e.message


def test_duplicate_partition() -> None:
    e = one_error(NODES + "PartitionName=p\nPartitionName=p Nodes=ALL\n")
    assert (e.line, e.col) == (4, 15) and "already defined at <string>:3" in e.message


def test_default_time_above_max_time_is_cleared_with_a_warning() -> None:
    # slurmctld 22.05 logs "partition debug DefaultTime exceeds MaxTime (60 > 30)" and runs
    # with DefaultTime NONE for that partition only; the others keep the DEFAULT line's value.
    cfg = parse_config_text(
        NODES + "PartitionName=DEFAULT MaxTime=2-00:00:00 DefaultTime=01:00:00\n"
        "PartitionName=debug Nodes=c[1-2] MaxTime=30:00 Default=YES\n"
        "PartitionName=batch Nodes=c[3-4]\n", path="site.conf")
    debug, batch = cfg.partitions
    assert (debug.max_time, debug.default_time) == (30, None)
    assert (batch.max_time, batch.default_time) == (2880, 60)
    (w,) = cfg.warnings
    assert (w.path, w.line, w.severity) == ("site.conf", 4, "warning")
    assert "partition debug DefaultTime exceeds MaxTime (60 > 30)" in w.message
    assert w.format().startswith("site.conf:4:")


def test_default_time_above_max_time_on_one_line() -> None:
    cfg = parse_config_text(NODES + "PartitionName=p MaxTime=10 DefaultTime=20\n")
    assert (cfg.partitions[0].max_time, cfg.partitions[0].default_time) == (10, None)
    assert "(20 > 10)" in cfg.warnings[0].message
