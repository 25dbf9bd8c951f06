"""rinfo/rcontrol against a real rctld + rnoded cluster on loopback: golden outputs, end to end.

Golden files live in tests/cli/golden/; times are masked. Regenerate with
RANCH_UPDATE_GOLDEN=1 after checking the new output by eye.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from launcher import Controller

from ranch.conf.hostlist import fold

GOLDEN = Path(__file__).resolve().parent / "golden"
ADMIN = "goldenadmin"  # getpass.getuser() reads LOGNAME first: a fixed name for the goldens

CONF = """\
ClusterName=golden
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
AuthKeyFile={key}
HeartbeatInterval=1
SlurmdTimeout=10
ReturnToService=0
NodeName=DEFAULT CPUs=2 RealMemory=64 TmpDisk=0
NodeName=n[01-08] Features=cpu Weight=2
NodeName=c01 State=CLOUD Weight=100
NodeName=f01 State=FUTURE
PartitionName=debug Nodes=n[01-06] Default=YES MaxTime=60
PartitionName=big Nodes=n[05-08],c01,f01 MaxTime=2-00:00:00 DefaultTime=30 AllowGroups=wheel \
    AllowAccounts=physics,chem PriorityTier=5 PriorityJobFactor=3 LLN=YES OverSubscribe=FORCE:2 \
    DefMemPerCPU=100 MaxMemPerCPU=200 ExclusiveUser=YES MinNodes=1 MaxNodes=4
PartitionName=hide Nodes=n01 Hidden=YES
"""

E2E_CONF = """\
ClusterName=e2e
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
AuthKeyFile={key}
HeartbeatInterval=1
SlurmdTimeout=30
NodeName=w[1-4] CPUs=1 RealMemory=64 TmpDisk=0
PartitionName=all Nodes=w[1-4] Default=YES
"""

_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_CTIME = re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}$", re.M)
_VOLATILE = re.compile(r"\b(CPULoad|FreeMem|Version|Arch)=\S+")
_OS = re.compile(r"\bOS=.*?(?= RealMemory=|$)", re.M)  # the value has spaces ("Linux 6.1.0")


def mask(text: str) -> str:
    text = _ISO.sub("<TIME>", text)
    text = _CTIME.sub("<NOW>", text)
    text = _OS.sub("OS=<X>", text)
    return _VOLATILE.sub(lambda m: f"{m.group(1)}=<X>", text)


def mask_json(doc: dict) -> str:
    for e in doc["sinfo"]:
        e["cpus"]["load"] = "<X>"
        e["memory"]["free"] = "<X>"
        if e["reason"]["time"]["set"]:
            e["reason"]["time"]["number"] = "<TIME>"
    doc["meta"]["command"] = "<ARGV>"
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("RANCH_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with RANCH_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"output differs from {path}"


def _require_daemons() -> None:
    root = Path(__file__).resolve().parents[2]
    if (not (root / "ranch" / "ctld" / "main.py").exists()
            or not (root / "ranch" / "noded" / "main.py").exists()):
        pytest.skip("rctld/rnoded not available")


@pytest.fixture(scope="module")
def golden_cluster(tmp_path_factory):
    """Nodes in idle, alloc, mix, drain, drng, down*, fail, idle~ and futr."""
    _require_daemons()
    work = tmp_path_factory.mktemp("golden")
    ctl = Controller(work, CONF)
    ctl.env["LOGNAME"] = ADMIN
    started = False
    try:
        ctl.start()
        started = True
        for i in range(1, 9):
            ctl.start_node(f"n{i:02d}")
        ctl.wait_states({f"n{i:02d}": "idle" for i in range(1, 9)}, timeout=60)
        # Jobs make n02 alloc and n03, n05 mix, as users' work would.
        for node, cpus in (("n02", 2), ("n03", 1), ("n05", 1)):
            done = ctl.run("rbatch", "-D", str(work), "-w", node, "-c", str(cpus),
                           "--wrap", "sleep 300")
            assert done.returncode == 0, done.stderr
        ctl.wait_states({"n02": "alloc", "n03": "mix", "n05": "mix"}, timeout=30)
        for argv in (
            ["NodeName=n[04-05]", "State=DRAIN", "Reason=bad fan"],
            ["NodeName=n07", "State=FAIL", "Reason=psu smells"],
        ):
            done = ctl.run("rcontrol", "update", *argv)
            assert done.returncode == 0, done.stderr
        ctl.kill("n06")
        ctl.wait_states(
            {"n01": "idle", "n02": "alloc", "n03": "mix", "n04": "drain", "n05": "drng",
             "n06": "down*", "n07": "fail", "n08": "idle", "c01": "idle~", "f01": "futr"},
            timeout=30,
        )
        yield ctl
    finally:
        try:
            if started:  # no sleep of ours outlives the test
                ctl.run("rcancel", "-u", ADMIN)
                ctl.wait_for(lambda: not ctl.run("rqueue", "-h").stdout.strip(), 15,
                             "queue empty")
        finally:
            ctl.stop()


VIEWS = {
    "rinfo.txt": [],
    "rinfo_N.txt": ["-N"],
    "rinfo_l.txt": ["-l"],
    "rinfo_Nl.txt": ["-Nl"],
    "rinfo_R.txt": ["-R"],
    "rinfo_lR.txt": ["-lR"],
    "rinfo_s.txt": ["-s"],
    "rinfo_F_a.txt": ["-F", "-a"],
    "rinfo_e_o.txt": ["-e", "-o", "%P %.5a %l %D %t %T %c %C %F %m %G %E %u %w %z %f %N"],
    "rinfo_t_p.txt": ["-p", "big", "-t", "drain,down,idle~"],
    "rinfo_n_h.txt": ["-n", "n[01-04]", "-h"],
    "rinfo_N_o.txt": ["-N", "-o", "%N %t"],  # a row per node and partition, as sinfo -N
    "rinfo_o_limits.txt": ["-o", "%P %l %L %s %h %g"],
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_rinfo_views(golden_cluster: Controller, name: str) -> None:
    done = golden_cluster.run("rinfo", *VIEWS[name])
    assert done.returncode == 0 and done.stderr == "", done.stderr
    check_golden(name, mask(done.stdout))


def test_rinfo_json(golden_cluster: Controller) -> None:
    done = golden_cluster.run("rinfo", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    states = {tuple(e["node"]["state"]) for e in doc["sinfo"]}
    assert ("IDLE", "DRAIN") in states and ("MIXED", "DRAIN") in states
    check_golden("rinfo.json", mask_json(doc))


def test_rinfo_metrics(golden_cluster: Controller) -> None:
    done = golden_cluster.run("rinfo", "-N", "--metrics", "-n", "n[01,06]", "-p", "debug")
    assert done.returncode == 0, done.stderr
    head, live, dead = done.stdout.splitlines()
    assert head.split()[4:] == ["CPU%", "MEM%", "GPU_UTIL", "GPU_MEM", "MAX_TEMP", "HB_AGE",
                                "HEALTH"]
    assert live.split()[:4] == ["n01", "1", "debug*", "idle"]
    assert re.fullmatch(r"\d+(\.\d)?", live.split()[4]), live  # a CPU% from heartbeats
    assert re.fullmatch(r"\d+s", live.split()[9]), live  # heartbeat age
    assert dead.split()[3] == "down*"


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("show_node.txt", ["show", "node", "n[04-06]"]),
        ("show_node_o.txt", ["-o", "show", "node", "n07,c01,f01"]),
        ("show_partition.txt", ["show", "partition"]),
        ("show_partition_big_o.txt", ["-o", "show", "partition", "big"]),
        ("show_node_n07_o.txt", ["show", "node", "n07", "-o"]),  # -o after, as scontrol takes
    ],
)
def test_rcontrol_show(golden_cluster: Controller, name: str, argv: list[str]) -> None:
    done = golden_cluster.run("rcontrol", *argv)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    check_golden(name, mask(done.stdout))


def test_rcontrol_show_json_and_config(golden_cluster: Controller) -> None:
    done = golden_cluster.run("rcontrol", "--json", "show", "node", "n04")
    assert done.returncode == 0, done.stderr
    [n04] = json.loads(done.stdout)["nodes"]
    assert n04["state"] == ["IDLE", "DRAIN"]
    assert (n04["reason"], n04["reason_set_by_user"]) == ("bad fan", ADMIN)
    done = golden_cluster.run("rcontrol", "show", "config")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Configuration data as of ")
    assert any(re.fullmatch(r"ClusterName\s+= golden", line) for line in lines), lines
    done = golden_cluster.run("rcontrol", "show", "node", "n99")
    assert (done.returncode, done.stderr) == (1, "rcontrol: error: Node n99 not found\n")


def test_rinfo_bad_state_exits_1_like_sinfo(golden_cluster: Controller) -> None:
    done = golden_cluster.run("rinfo", "-t", "bogus")
    assert done.returncode == 1 and "bogus" in done.stderr and done.stdout == ""


def test_ping(golden_cluster: Controller) -> None:
    done = golden_cluster.run("rcontrol", "ping")
    assert (done.returncode, done.stdout) == (0, "Slurmctld(primary) at 127.0.0.1 is UP\n")


# --------------------------------------------------------------------------------------------
# End to end: drain two nodes of four, resume one, refusals change nothing.


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    _require_daemons()
    ctl = Controller(tmp_path_factory.mktemp("e2e"), E2E_CONF)
    ctl.env["LOGNAME"] = ADMIN
    try:
        ctl.start()
        for i in range(1, 5):
            ctl.start_node(f"w{i}")
        ctl.wait_states({f"w{i}": "idle" for i in range(1, 5)}, timeout=60)
        yield ctl
    finally:
        ctl.stop()


def test_drain_resume_and_refusals(four: Controller) -> None:
    done = four.run("rcontrol", "update", "NodeName=w[1-2]", "State=DRAIN", "Reason=bad fan")
    assert (done.returncode, done.stderr) == (0, "")
    w12, w34 = fold(["w1", "w2"]), fold(["w3", "w4"])
    rows = four.run("rinfo", "-h").stdout.splitlines()
    assert [r.split()[3:] for r in rows] == [["2", "drain", w12], ["2", "idle", w34]]
    [reason] = four.run("rinfo", "-R", "-h").stdout.splitlines()
    user = ADMIN[:9]  # sinfo -R's USER column is 9 wide
    assert re.fullmatch(rf"bad fan {{13}} {user} {_ISO.pattern} {re.escape(w12)}", reason), reason
    shown = four.run("rcontrol", "show", "node", "w1").stdout
    assert re.search(rf"^   Reason=bad fan \[{ADMIN}@{_ISO.pattern}\]$", shown, re.M), shown
    assert "State=IDLE+DRAIN " in shown

    done = four.run("rcontrol", "update", "nodename=w2", "state=res")
    assert (done.returncode, done.stderr) == (0, "")
    four.wait_states({"w1": "drain", "w2": "idle"}, timeout=10)

    before = four.nodes()
    done = four.run("rcontrol", "update", "NodeName=w3", "State=DOWN")
    assert done.returncode == 1
    assert done.stderr == (
        "rcontrol: error: You must specify a reason when DOWNING or DRAINING a node. "
        "Request denied\n"
    )
    done = four.run("rcontrol", "update", "NodeName=w[3-9]", "State=DRAIN", "Reason=x")
    # scontrol's line that scripts match, then the unknown names.
    first, second = done.stderr.splitlines()
    assert done.returncode == 1 and first == "slurm_update error: Invalid node name specified"
    assert second.startswith("rcontrol: error: ") and "w[5-9]" in second, done.stderr
    after = four.nodes()
    assert {n: d["complete"] for n, d in after.items()} == {
        n: d["complete"] for n, d in before.items()
    }
    assert after["w3"]["state"]["reason"] is None
