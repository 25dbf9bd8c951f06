"""`rctld --check` (ranch.ctld.check.run_check): TOML that parses back, --json shape, exit codes."""

import json
import tomllib
from pathlib import Path

import pytest

from ranch.conf.build import load_config
from ranch.conf.hostlist import expand
from ranch.ctld.check import run_check

DATA = Path(__file__).parent / "data"
Cap = pytest.CaptureFixture[str]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "slurm-like.conf"


SITES = [DATA / "site_a" / "slurm.conf", DATA / "site_b" / "slurm.conf",
         DATA / "site_c" / "cluster.conf",
         *(DATA / s / "slurm.conf" for s in ("site_d", "site_e", "site_f"))]


@pytest.mark.parametrize("conf", [EXAMPLE, *SITES])
def test_toml_output_parses_back_and_folds_nodes(conf: Path, capsys: Cap) -> None:
    assert run_check(str(conf)) == 0
    out = capsys.readouterr().out
    doc = tomllib.loads(out)
    cfg = load_config(conf)
    assert doc["cluster_name"] == cfg.cluster_name
    assert doc["config_hash"] == cfg.config_hash
    # Every node appears once, in a group folded into a hostlist with the right values.
    seen: list[str] = []
    for group in doc["node_groups"]:
        names = expand(group["nodes"])
        assert len(names) == group["count"]
        for name in names:
            node = cfg.node(name)
            assert (node.cpus, node.real_memory, node.state, node.weight) == (
                group["cpus"], group["real_memory"], group["state"], group["weight"])
            assert node.gres_str == group.get("gres", "")
        seen += names
    assert sorted(seen) == sorted(n.name for n in cfg.nodes)
    assert len(doc["node_groups"]) < len(cfg.nodes) / 4
    for part, p in zip(doc["partitions"], cfg.partitions, strict=True):
        assert part["name"] == p.name
        assert sorted(expand(part["nodes"])) == sorted(p.nodes) if p.nodes else True
        assert part["max_time"] == ("UNLIMITED" if p.max_time is None else p.max_time)
    assert doc["ignored"] == list(cfg.ignored)


def test_example_toml_values(capsys: Cap) -> None:
    assert run_check(str(EXAMPLE)) == 0
    captured = capsys.readouterr()
    doc = tomllib.loads(captured.out)
    groups = {g["nodes"]: g for g in doc["node_groups"]}
    assert groups["gpu[01-04]"]["gres"] == "gpu:4"
    assert groups["cloud[01-04]"]["state"] == "CLOUD"
    assert doc["timeouts"]["heartbeat_interval"] == 5
    assert doc["control"]["hosts"] == [{"name": "localhost", "addr": "127.0.0.1"}]
    assert doc["settings"]["SelectType"] == "select/cons_tres"
    assert "Ranch keeps but ignores these Slurm keys: SelectType" in captured.err


def test_json_shape(capsys: Cap) -> None:
    assert run_check(str(EXAMPLE), as_json=True) == 0
    doc = json.loads(capsys.readouterr().out)
    node = next(n for n in doc["nodes"] if n["name"] == "gpu02")
    for key in ("name", "cpus", "real_memory", "gres", "features", "state", "weight"):
        assert key in node
    assert (node["cpus"], node["real_memory"], node["gres"], node["features"], node["state"],
            node["weight"], node["partitions"]) == (2, 1024, "gpu:4", ["gpu", "fake"],
                                                    "UNKNOWN", 10, ["gpu"])
    part = next(p for p in doc["partitions"] if p["name"] == "gpu")
    assert (part["nodes"], part["default"], part["state"], part["max_time"]) == (
        ["gpu01", "gpu02", "gpu03", "gpu04"], True, "UP", 1440)
    cpu = next(p for p in doc["partitions"] if p["name"] == "cpu")
    assert cpu["default"] is False


def test_error_exit_2_with_diagnostics_on_stderr(tmp_path: Path, capsys: Cap) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text("NodeName=a CPUs=x\nPartitionName=p Nodes=b\n")
    assert run_check(str(bad)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{bad}:1:17: CPUs: 'x' is not a whole number" in captured.err
    assert f"{bad}:2:23: Nodes: node(s) b not defined" in captured.err
    assert "2 errors" in captured.err


def test_an_unknown_key_exits_1_as_slurmctld_and_strict_makes_it_an_error(
        tmp_path: Path, capsys: Cap) -> None:
    conf = tmp_path / "c.conf"
    conf.write_text("NodeName=a\nSlurmdTimout=30\nPartitionName=p Nodes=a\n")
    assert run_check(str(conf)) == 1  # slurmctld 22.05's status: it will not start with it
    captured = capsys.readouterr()
    assert f"{conf}:2:1: warning: unknown key 'SlurmdTimout'; did you mean 'SlurmdTimeout'? " \
        "(ignored; slurmctld 22.05 refuses this: Parsing error at unrecognized key: " \
        "SlurmdTimout)" in captured.err
    assert captured.err.splitlines()[-1] == (
        f"{conf}: slurmctld 22.05 would not start with this file (Unable to process "
        "configuration file: 1 setting above); rctld runs it")
    assert 'name = "p"' in captured.out  # still the normalized config Ranch runs
    assert run_check(str(conf), strict=True) == 2
    assert "did you mean 'SlurmdTimeout'?" in capsys.readouterr().err


def test_missing_file_exit_2(tmp_path: Path, capsys: Cap) -> None:
    assert run_check(str(tmp_path / "none.conf")) == 2
    assert "cannot read config file" in capsys.readouterr().err
