"""The fleet simulator against a real rctld: 50 nodes register and heartbeat for a few seconds,
so bench/fleet.py never rots. Figures are checked for presence and sanity, never for speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from fleet_lib import limits  # noqa: E402
from fleet_lib.config import Timing, config_text, hardware, hostlist, node_name  # noqa: E402

from ranch.conf.build import parse_config_text  # noqa: E402

REQUIRED = ("nodes", "interval_s", "heartbeats_per_s", "ctld_cpu_pct", "ctld_rss_mb",
            "hb_p50_ms", "hb_p99_ms", "storm_s", "detect_lag_s", "rinfo_s", "false_down")


def test_generated_config_matches_the_hardware_nodes_report() -> None:
    cfg = parse_config_text(config_text(1234, Timing(heartbeat_interval=7, slurmd_timeout=21)))
    assert [n.name for n in cfg.nodes] == [node_name(i, 1234) for i in range(1, 1235)]
    assert cfg.timeouts.heartbeat_interval == 7 and cfg.timeouts.slurmd_timeout == 21
    assert cfg.partitions[0].nodes == tuple(n.name for n in cfg.nodes)
    node = cfg.node("sim00042")
    hw = hardware("sim00042", 42)
    assert (hw.cpus, hw.sockets, hw.cores_per_socket, hw.threads_per_core) == (
        node.cpus, node.sockets, node.cores_per_socket, node.threads_per_core)
    assert hw.real_memory_mib >= node.real_memory and len(hw.gpus) == node.gpus
    assert hostlist(1, 1000, 1234) == "sim[00001-01000]"


def test_source_addresses_stay_on_loopback() -> None:
    assert limits.source_addresses(10_000) == ["127.0.0.1"]
    many = limits.source_addresses(60_000)
    assert len(many) == 3 and all(a.startswith("127.") for a in many)
    assert limits.source_addresses(50, count=2) == ["127.0.1.1", "127.0.1.2"]


def test_fifty_nodes_register_and_heartbeat(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fleet.py"), "--nodes", "50", "--interval", "1",
         "--duration", "3", "--scenario", "steady", "--json", str(out),
         "--source-addresses", "2", "--loop-steps",
         "--workdir", str(tmp_path / "ctld")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    log = tmp_path / "ctld" / "rctld.log"
    context = f"{proc.stdout}\n{proc.stderr}\n{log.read_text() if log.exists() else ''}"
    assert proc.returncode == 0, context
    fig = json.loads(out.read_text())
    assert all(key in fig for key in REQUIRED), sorted(set(REQUIRED) - set(fig))
    assert fig["nodes"] == 50 and fig["registered"] == 50 and fig["storm_idle"] == 50, context
    assert fig["storm_s"] is not None and fig["storm_s"] > 0
    # Heartbeats flowed in the 3 s window: each of the 50 nodes beats once a second.
    assert fig["hb_sent"] >= 50 and fig["hb_replied"] > 0, fig
    assert fig["hb_replied"] + fig["hb_late"] >= 0.8 * fig["hb_sent"], fig
    assert fig["heartbeats_per_s"] > 0 and fig["hb_p50_ms"] <= fig["hb_p99_ms"]
    assert fig["ctld_cpu_pct"] >= 0 and fig["ctld_rss_mb"] > 0 and fig["sim_cpu_pct"] >= 0
    assert fig["ctld_exit_status"] == 0, context
    assert fig["state_files"] >= 1 and fig["state_file_bytes"] > 0
    # The path fleets over 25,000 nodes take: sockets bound to two loopback source addresses.
    assert fig["source_addresses_used"] == ["127.0.1.1", "127.0.1.2"], fig
    assert "errors" not in fig and "refused" not in fig, fig
    # rctld ran under the loop watcher (--loop-steps): a longest step per phase, in ms
    assert {"loop_longest_ms_storm", "loop_longest_ms_steady"} <= set(fig), sorted(fig)
    assert all(fig[k] >= 0 for k in ("loop_longest_ms_storm", "loop_longest_ms_steady"))
    assert all(" ms " in step for step in fig["loop_longest_steps"]), fig


@pytest.mark.parametrize("argv", [["--nodes", "0"], ["--nodes", "5", "--interval", "0"]])
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "fleet.py"), *argv],
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert proc.returncode == 2 and "--nodes" in proc.stderr


def test_killed_nodes_are_seen_down(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fleet.py"), "--nodes", "20", "--interval", "1",
         "--slurmd-timeout", "3", "--duration", "1", "--scenario", "mass-failure", "--kill", "2",
         "--json", str(out)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    fig = json.loads(out.read_text())
    # Both silent nodes went DOWN; the lag figure comes from the controller's own reason time.
    assert fig["killed"] == 2 and fig["killed_down"] == 2, fig
    assert fig["detect_lag_s"] is not None and fig["noresp_lag_observed_s"] is not None, fig


def test_stalled_follower_and_event_churn_figures(tmp_path: Path) -> None:
    """Issue 13's scenario: admin state changes feed the event log while a --follow client
    never reads; at the end it is read and was told it missed events."""
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fleet.py"), "--nodes", "40", "--interval", "1",
         "--duration", "3", "--event-churn", "20", "--event-churn-nodes", "40",
         "--stalled-follower", "--json", str(out)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    fig = json.loads(out.read_text())
    assert fig["stalled_follower"] is True and fig["event_churn_requests"] > 10, fig
    assert fig["stalled_follower_missed"] > 0 and fig["stalled_follower_got"] > 0, fig
    assert fig["false_down"] == 0 and fig["hb_replied"] > 0, fig
