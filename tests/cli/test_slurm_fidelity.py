"""rinfo/rcontrol text that scripts parse, as sinfo/scontrol 22.05 print it (checked against
real 22.05.8): sinfo's time format, -N rows, partitions' configured values."""

from __future__ import annotations

from pathlib import Path

import pytest
from records import node, part, snapshot

from ranch.cli import show_records
from ranch.cli.rinfo import build_parser, table_lines
from ranch.conf.hostlist import fold

GOLDEN = Path(__file__).resolve().parent / "golden"

# MaxTime as slurm.conf writes it -> minutes; the golden rows hold what sinfo printed for them.
LIMITS = [("p5", "5", 5), ("p30", "30:00", 30), ("p59", "59", 59), ("p60", "1:00:00", 60),
          ("p90", "90", 90), ("p2359", "23:59:00", 23 * 60 + 59), ("p1d", "1-0", 1440),
          ("p2d", "2-00:00:00", 2880), ("pinf", "UNLIMITED", None)]


def limits_cluster():
    names = [name for name, _, _ in LIMITS]
    parts = [part(name, ["n01"], max_time=minutes, default_time=5 if name == "pinf" else None)
             for name, _, minutes in LIMITS]
    return snapshot([node("n01", parts=tuple(names))], parts)


def view(*argv: str, snap=None) -> str:
    lines = table_lines(snap or limits_cluster(), build_parser().parse_args(list(argv)))
    return "".join(line + "\n" for line in lines)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    import os

    if os.environ.get("RANCH_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"output differs from {path}"


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("limits.txt", []),
        ("limits_s.txt", ["-s"]),
        ("limits_l.txt", ["-l"]),
        ("limits_o.txt", ["-o", "%P %l %L"]),
    ],
)
def test_sinfo_time_format_everywhere(name: str, argv: list[str]) -> None:
    check_golden(name, view(*argv))


def test_time_column_values() -> None:
    rows = view("-h", "-o", "%l").split()
    assert rows == ["5:00", "30:00", "59:00", "1:00:00", "1:30:00", "23:59:00", "1-00:00:00",
                    "2-00:00:00", "infinite"]


def test_node_oriented_view_without_partition_field_repeats_nodes() -> None:
    snap = snapshot(
        [node("a1", parts=("debug", "big")), node("a2", parts=("big",)), node("a3", parts=())],
        [part("debug", ["a1"], default=True), part("big", ["a1", "a2"])])
    assert view("-N", "-h", "-o", "%N %t", snap=snap).splitlines() == [
        "a1 idle", "a1 idle", "a2 idle", "a3 idle"]
    assert view("-N", "-h", "-o", "%N %P", snap=snap).splitlines() == [
        "a1 debug*", "a1 big", "a2 big", "a3 n/a"]
    # -p keeps only the rows of the partitions asked for.
    assert view("-N", "-h", "-p", "big", "-o", "%N", snap=snap).split() == ["a1", "a2"]


CONFIGURED = {
    "AllowGroups": "wheel", "AllowAccounts": "a,b", "AllowQos": "normal", "PriorityTier": "5",
    "PriorityJobFactor": "3", "LLN": "YES", "OverSubscribe": "FORCE:4", "DefMemPerCPU": "100",
    "MaxMemPerCPU": "200", "ExclusiveUser": "YES",
}


def test_show_partition_prints_configured_values() -> None:
    # The same partition as given to slurmctld 22.05; its scontrol record, word for word.
    p = part("debug", ["m1", "m2", "n1", "n2"], default=True, max_time=30, options=CONFIGURED)
    nodes = {n: node(n, cpus=c, real_memory=m)
             for n, c, m in (("m1", 2, 1), ("m2", 2, 1), ("n1", 80, 1000), ("n2", 80, 1000))}
    assert show_records.partition_lines(p, nodes, fold) == [
        "PartitionName=debug",
        "AllowGroups=wheel AllowAccounts=a,b AllowQos=normal",
        "AllocNodes=ALL Default=YES QoS=N/A",
        "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=YES GraceTime=0 Hidden=NO",
        "MaxNodes=UNLIMITED MaxTime=00:30:00 MinNodes=0 LLN=YES MaxCPUsPerNode=UNLIMITED",
        f"Nodes={fold(['m1', 'm2', 'n1', 'n2'])}",  # Slurm: m[1-2],n[1-2]; same hosts
        "PriorityJobFactor=3 PriorityTier=5 RootOnly=NO ReqResv=NO OverSubscribe=FORCE:4",
        "OverTimeLimit=NONE PreemptMode=OFF",
        "State=UP TotalCPUs=164 TotalNodes=4 SelectTypeParameters=NONE",
        "JobDefaults=(null)",
        "DefMemPerCPU=100 MaxMemPerCPU=200",
        "TRES=cpu=164,mem=2002M,node=4,billing=164",
    ]


def test_show_partition_deny_lists_limits_and_billing() -> None:
    opts = {"DenyAccounts": "x,y", "Alternate": "b", "MaxNodes": "4", "MinNodes": "1",
            "MaxCPUsPerNode": "8", "GraceTime": "30", "DisableRootJobs": "YES",
            "RootOnly": "YES", "ReqResv": "YES", "OverTimeLimit": "5", "PreemptMode": "requeue",
            "DefMemPerNode": "1000", "MaxMemPerNode": "2000", "AllocNodes": "n1",
            "TRESBillingWeights": "CPU=1.0,Mem=0.25G", "Shared": "YES", "DefCpuPerGPU": "4",
            "DefMemPerGPU": "100"}
    p = part("a", ["n1"], default=True, hidden=True, state="DRAIN", options=opts)
    lines = show_records.partition_lines(p, {"n1": node("n1", cpus=2, real_memory=1)}, fold)
    assert lines[1:5] == [
        "AllowGroups=ALL DenyAccounts=x,y AllowQos=ALL",
        "AllocNodes=n1 Alternate=b Default=YES QoS=N/A",
        "DefaultTime=NONE DisableRootJobs=YES ExclusiveUser=NO GraceTime=30 Hidden=YES",
        "MaxNodes=4 MaxTime=UNLIMITED MinNodes=1 LLN=NO MaxCPUsPerNode=8",
    ]
    assert lines[6:] == [
        "PriorityJobFactor=1 PriorityTier=1 RootOnly=YES ReqResv=YES OverSubscribe=YES:4",
        "OverTimeLimit=5 PreemptMode=REQUEUE",
        "State=DRAIN TotalCPUs=2 TotalNodes=1 SelectTypeParameters=NONE",
        "JobDefaults=DefCpuPerGPU=4,DefMemPerGPU=100",
        "DefMemPerNode=1000 MaxMemPerNode=2000",
        "TRES=cpu=2,mem=1M,node=1,billing=2",
        "TRESBillingWeights=CPU=1.0,Mem=0.25G",
    ]
    assert not any("MaxCPUsPerSocket" in line for line in lines)  # 22.05 has no such key


def test_sinfo_long_columns_from_partition_options() -> None:
    opts = {"MinNodes": "1", "MaxNodes": "4", "RootOnly": "YES", "Shared": "YES",
            "AllowGroups": "wheel"}
    snap = snapshot([node("n1", parts=("a", "b"))],
                    [part("a", ["n1"], options=opts),
                     part("b", ["n1"], options={"OverSubscribe": "EXCLUSIVE"})])
    rows = [r.split()[3:7] for r in view("-l", "-h", snap=snap).splitlines()]
    assert rows == [["1-4", "yes", "YES:4", "wheel"], ["1-infinite", "no", "EXCLUSIV", "all"]]
