"""rcontrol without a controller: show records, update parsing, local hostlist commands, target."""

from __future__ import annotations

import json
import os

import pytest
from records import T0, mixed_cluster, node

from ranch.cli import show_records
from ranch.cli.controller import DEFAULT_PORT, CliError, find_target
from ranch.cli.node_update import parse_update
from ranch.cli.rcontrol import main
from ranch.conf.hostlist import fold
from ranch.statemachine.events import REASON_REQUIRED_MESSAGE as REASON_MISSING


def test_show_node_multiline_layout() -> None:
    n = node(
        "n05", "IDLE", ("DRAIN",), compact="drain", reason="bad fan", user="alice",
        gres="gpu:4", features=["ib", "h100"], arch="x86_64", os="Linux 6.1.0-18-amd64",
        health={"verdict": "ok", "message": "", "warnings": ["gpu1 at 88C"]},
    )
    text = show_records.records_text([show_records.node_lines(n)], one_line=False)
    assert text == (
        "NodeName=n05 Arch=x86_64 CoresPerSocket=2\n"
        "   CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=0.25\n"
        "   AvailableFeatures=ib,h100\n"
        "   ActiveFeatures=ib,h100\n"
        "   Gres=gpu:4\n"
        "   NodeAddr=10.0.0.5 NodeHostName=n05 Version=0.1.0\n"
        "   OS=Linux 6.1.0-18-amd64\n"
        "   RealMemory=16000 AllocMem=0 FreeMem=12000 Sockets=2 Boards=1\n"
        "   State=IDLE+DRAIN ThreadsPerCore=2 TmpDisk=1000 Weight=1 Owner=N/A MCS_label=N/A\n"
        "   Partitions=debug\n"
        "   BootTime=2026-09-21T13:13:20 SlurmdStartTime=2026-09-21T13:23:20\n"
        "   LastBusyTime=2026-09-21T14:12:20 LastChange=None\n"
        "   CfgTRES=cpu=8,mem=16000M,billing=8,gres/gpu=4\n"
        "   AllocTRES=\n"
        "   CapWatts=n/a\n"
        "   CurrentWatts=0 AveWatts=0\n"
        "   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n"
        "   Reason=bad fan [alice@2026-09-21T14:13:20]\n"
        "   Health=WARNING: gpu1 at 88C\n"
        "\n"
    )


def test_show_node_one_line_and_never_seen_node() -> None:
    n = node("n01", "UNKNOWN", ("NO_RESPOND",), compact="unk*", cpu_load=None, free_mem=None,
             boot_time=None, slurmd_start_time=None, last_busy=None, partitions=[])
    [line] = show_records.records_text([show_records.node_lines(n)], one_line=True).splitlines()
    assert line.startswith("NodeName=n01 CoresPerSocket=2 CPUAlloc=0 ")
    assert "CPULoad=N/A" in line and "FreeMem=N/A" in line
    assert "State=UNKNOWN+NO_RESPOND" in line
    assert "BootTime=None SlurmdStartTime=None" in line
    assert "LastBusyTime=Unknown LastChange=" in line  # 22.05 says Unknown for a never-seen node
    assert "Partitions=" not in line and "Reason=" not in line


def test_show_partition_layout() -> None:
    snap = mixed_cluster()
    by_name = {n["name"]: n for n in snap.nodes}
    lines = show_records.partition_lines(snap.partitions[1], by_name, fold)
    assert lines[0] == "PartitionName=gpu"
    assert "AllocNodes=ALL Default=NO QoS=N/A" in lines
    assert any(x.startswith("MaxNodes=UNLIMITED MaxTime=2-00:30:00 ") for x in lines)
    assert f"Nodes={fold(['n07', 'n08', 'n09', 'n10'])}" in lines
    assert "State=UP TotalCPUs=32 TotalNodes=4 SelectTypeParameters=NONE" in lines
    assert show_records.partition_lines(snap.partitions[3], by_name, fold)[5] == "Nodes=(null)"


def test_node_json_state_array_and_reason() -> None:
    n = node("n07", "DOWN", ("NO_RESPOND",), reason="Not responding", user=None)
    doc = show_records.node_json(n)
    assert doc["state"] == ["DOWN", "NOT_RESPONDING"]
    assert doc["reason"] == "Not responding" and doc["reason_set_by_user"] == "root"
    assert doc["reason_changed_at"] == {"set": True, "infinite": False, "number": int(T0)}
    json.dumps(doc)


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["NodeName=n[01-02]", "State=drain", "Reason=bad fan"], ("n[01-02]", "DRAIN", "bad fan")),
        (["nodename=ALL", "state=RES"], ("ALL", "RESUME", None)),
        (["NodeName=n1", "State=pow"], None),  # POWER_DOWN needs 7 letters
        (["NodeName=n1", "STATE=Power_Down_Force"], ("n1", "POWER_DOWN_FORCE", None)),
        (["NodeName=n1", "State=noresp"], ("n1", "NORESP", None)),
        (["NodeName=n1", "Reason=just a note"], ("n1", None, "just a note")),
    ],
)
def test_parse_update(words, expected) -> None:
    if expected is None:
        with pytest.raises(CliError) as err:
            parse_update(words)
        assert "Valid states are" in err.value.message and err.value.code == 1
    else:
        assert parse_update(words) == expected


@pytest.mark.parametrize("state", ["DOWN", "drain", "FAIL"])
def test_reason_required(state: str) -> None:
    with pytest.raises(CliError) as err:
        parse_update(["NodeName=n1", f"State={state}"])
    assert err.value.message == REASON_MISSING and err.value.code == 1


@pytest.mark.parametrize(
    "words",
    [["State=DRAIN", "Reason=x"], ["NodeName=n1"], ["NodeName=n1", "Weight=3"], ["NodeName"],
     ["NodeName=n[3-1]", "State=RESUME"]],
)
def test_update_usage_errors(words) -> None:
    with pytest.raises(CliError) as err:
        parse_update(words)
    assert err.value.code == 1


def test_local_hostlist_commands(capsys) -> None:
    assert main(["show", "hostnames", "n[01-03],login"]) == 0
    assert capsys.readouterr().out == "n01\nn02\nn03\nlogin\n"
    assert main(["show", "hostlist", "tux2,tux1,tux2"]) == 0
    assert capsys.readouterr().out == fold(["tux2", "tux1", "tux2"], sort=False) + "\n"
    assert main(["show", "hostlistsorted", "tux2,tux1,tux3"]) == 0
    assert capsys.readouterr().out == fold(["tux1", "tux2", "tux3"]) + "\n"


def test_usage_errors_exit_1_as_scontrol(capsys) -> None:
    assert main([]) == 1
    assert main(["frobnicate"]) == 1
    assert main(["show"]) == 1
    assert main(["show", "hostnames", "n[1-"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("rcontrol: error: ") for line in err)


def test_unreachable_names_address_and_fix(tmp_path, capsys) -> None:
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    key.chmod(0o600)
    assert main(["--server", "127.0.0.1:1", "--key-file", str(key), "show", "node"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert "127.0.0.1:1" in line and "--server" in line and "RANCH_SERVER" in line
    assert main(["--server", "127.0.0.1:1", "--key-file", str(key), "ping"]) == 1
    out, err = capsys.readouterr()
    # scontrol's lines, its banner for root, nothing on stderr (tests/conformance/test_ping.py)
    banner = ("*" * 41 + "\n** RESTORE SLURMCTLD DAEMON TO SERVICE **\n" + "*" * 41 + "\n"
              if os.getuid() == 0 else "")
    assert (out, err) == ("Slurmctld(primary) at 127.0.0.1 is DOWN\n" + banner, "")


def test_target_precedence(tmp_path) -> None:
    conf = tmp_path / "c.conf"
    conf.write_text(
        "SlurmctldHost=ctl(10.1.2.3)\nSlurmctldPort=7000\nAuthKeyFile=/k/conf.key\n"
        "NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"
    )
    env = {"RANCH_CONF": str(conf)}
    t = find_target(None, None, None, env)
    assert (t.host, t.port, t.key_path) == ("10.1.2.3", 7000, "/k/conf.key")
    t = find_target(None, None, None, {**env, "RANCH_SERVER": "h2:7001", "RANCH_KEY_FILE": "/e"})
    assert (t.host, t.port, t.key_path) == ("h2", 7001, "/e")
    t = find_target("h3", "/cli", None, {**env, "RANCH_SERVER": "h2:7001"})
    assert (t.host, t.port, t.key_path, t.origin) == ("h3", DEFAULT_PORT, "/cli", "--server")
    t = find_target(None, None, None, {})
    assert (t.host, t.port) == ("127.0.0.1", 6817) and t.origin == "the default"
    with pytest.raises(CliError) as err:
        find_target("h:notaport", None, None, {})
    assert err.value.code == 1
    with pytest.raises(CliError, match="cannot read config"):
        find_target(None, None, str(tmp_path / "missing.conf"), {})


@pytest.mark.parametrize(("action", "word", "done"), [
    ("create", "Duration=-5", "created"), ("create", "duration=abc", "created"),
    ("create", "Duration=-5:00", "created"), ("update", "Duration=-5", "update")])
def test_an_invalid_duration_is_refused_before_asking_as_scontrol(action, word, done,
                                                                  capsys) -> None:
    """scontrol 22.05's words and status for a Duration it cannot take (negative, but -1 which
    is INFINITE, or malformed), checked before any request: no controller is running here."""
    words = ["reservation", "StartTime=now", word, "Nodes=n1", "Users=root"] if \
        action == "create" else ["ReservationName=x", word]
    assert main([action, *words]) == 1
    assert capsys.readouterr().err == (
        f"rcontrol: error: Invalid duration {word}.  No reservation {done}.\n")


def test_minus_one_and_unlimited_durations_parse_as_scontrol_takes_them() -> None:
    from ranch.cli.reservation_command import parse

    for word in ("Duration=-1", "Duration=UNLIMITED", "Duration=infinite"):
        assert parse("create", [word])["duration"] == -1
    assert parse("create", ["Duration=-0"])["duration"] == 0
    assert parse("create", ["Duration=1-00:00:00"])["duration"] == 1440
