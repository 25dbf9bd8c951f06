"""Global settings: typed defaults, controller hosts, power save, Ranch's own keys, unknown keys."""

import os
from pathlib import Path

import pytest

from ranch.conf.build import parse_config_text
from ranch.conf.model import ControllerHost, ExcNodes

from .helpers import one_error


def test_defaults_as_slurm() -> None:
    cfg = parse_config_text("")
    assert cfg.cluster_name == "cluster"
    assert (cfg.control.hosts, cfg.control.port) == ((), 6817)
    t = cfg.timeouts
    assert (t.slurmd_timeout, t.message_timeout, t.heartbeat_interval, t.return_to_service) == (
        300, 10, 10, 0)
    h = cfg.health
    assert (h.program, h.interval, h.timeout, h.node_state) == (None, 0, 60, ("ANY",))
    p = cfg.power
    assert (p.suspend_time, p.suspend_timeout, p.resume_timeout, p.suspend_rate,
            p.resume_rate) == (None, 30, 60, 60, 300)
    assert (cfg.auth.key_file, cfg.auth.node_approval) == (None, "auto")
    assert (cfg.nodes, cfg.partitions, cfg.settings, cfg.ignored) == ((), (), (), ())


def test_typed_globals_golden() -> None:
    text = (
        "ClusterName=MyCluster\nSlurmctldPort=7817\nSlurmdTimeout=30\nMessageTimeout=5\n"
        "HeartbeatInterval=3\nReturnToService=2\nHealthCheckProgram=/usr/sbin/nhc\n"
        "HealthCheckInterval=300\nHealthCheckTimeout=90\nHealthCheckNodeState=idle,Cycle\n"
        "SuspendTime=600\nSuspendTimeout=45\nResumeTimeout=300\nSuspendRate=0\nResumeRate=10\n"
        "SuspendExcParts=gpu,debug\nSuspendExcStates=down,drain\nNodeApproval=Manual\n"
        "SlurmdSpoolDir=/var/spool/slurmd\nStateSaveLocation=/var/lib/ranch\n")
    cfg = parse_config_text(text)
    assert cfg.cluster_name == "mycluster"
    assert cfg.control.port == 7817
    assert cfg.control.slurmd_spool_dir == "/var/spool/slurmd"
    assert cfg.control.state_save_location == "/var/lib/ranch"
    assert (cfg.timeouts.slurmd_timeout, cfg.timeouts.message_timeout,
            cfg.timeouts.heartbeat_interval, cfg.timeouts.return_to_service) == (30, 5, 3, 2)
    assert (cfg.health.program, cfg.health.interval, cfg.health.timeout,
            cfg.health.node_state) == ("/usr/sbin/nhc", 300, 90, ("IDLE", "CYCLE"))
    p = cfg.power
    assert (p.suspend_time, p.suspend_timeout, p.resume_timeout, p.suspend_rate,
            p.resume_rate) == (600, 45, 300, 0, 10)
    assert p.suspend_exc_parts == ("gpu", "debug")
    assert p.suspend_exc_states == ("DOWN", "DRAIN")
    assert cfg.auth.node_approval == "manual"
    # settings keep every key as written, canonical spelling
    assert dict(cfg.settings)["ClusterName"] == "MyCluster"
    assert dict(cfg.settings)["HealthCheckNodeState"] == "idle,Cycle"


@pytest.mark.parametrize("value", ["INFINITE", "-1", "NONE", "infinite"])
def test_suspend_time_off(value: str) -> None:
    assert parse_config_text(f"SuspendTime={value}\n").power.suspend_time is None


def test_slurmctldhost_repeatable_with_address() -> None:
    cfg = parse_config_text("SlurmctldHost=ctl1(10.0.0.1)\nSlurmctldHost=ctl2\n")
    assert cfg.control.hosts == (ControllerHost("ctl1", "10.0.0.1"), ControllerHost("ctl2", "ctl2"))
    assert cfg.settings == (("SlurmctldHost", "ctl1(10.0.0.1)"), ("SlurmctldHost", "ctl2"))
    assert cfg.warnings == ()


def test_control_machine_alias() -> None:
    cfg = parse_config_text("ControlMachine=head\nControlAddr=10.1.1.1\nBackupController=head2\n")
    assert cfg.control.hosts == (ControllerHost("head", "10.1.1.1"),
                                 ControllerHost("head2", "head2"))


def test_bad_slurmctldhost_form() -> None:
    e = one_error("SlurmctldHost=ctl(10.0.0.1\n")
    assert (e.line, e.col) == (1, 15)


def test_suspend_exc_nodes_with_counts() -> None:
    cfg = parse_config_text(
        "NodeName=n[1-20]\nSuspendExcNodes=n[1-10]:4,n[11-12],n13:1,n20\n")
    assert cfg.power.suspend_exc_nodes == (
        ExcNodes(tuple(f"n{i}" for i in range(1, 11)), 4),
        ExcNodes(("n11", "n12", "n13"), 1),
        ExcNodes(("n20",), None))


def test_relative_program_paths_resolve_against_config_dir(tmp_path: Path) -> None:
    conf = tmp_path / "etc" / "cluster.conf"
    conf.parent.mkdir()
    conf.write_text("HealthCheckProgram=hc.sh\nSuspendProgram=bin/suspend\nResumeProgram=/abs/r\n"
                    "ResumeFailProgram=../fail.sh\nAuthKeyFile=key\nStateSaveLocation=state\n")
    from ranch.conf.build import load_config

    cfg = load_config(conf)
    d = str(tmp_path / "etc")
    assert cfg.health.program == os.path.join(d, "hc.sh")
    assert cfg.power.suspend_program == os.path.join(d, "bin", "suspend")
    assert cfg.power.resume_program == "/abs/r"
    assert cfg.power.resume_fail_program == str(tmp_path / "fail.sh")
    assert cfg.auth.key_file == os.path.join(d, "key")
    assert cfg.control.state_save_location == os.path.join(d, "state")


def test_repeated_global_key_last_wins_with_warning() -> None:
    cfg = parse_config_text("SlurmdTimeout=100\nX=1\nslurmdtimeout=200\n", strict=False)
    assert cfg.timeouts.slurmd_timeout == 200
    assert dict(cfg.settings)["SlurmdTimeout"] == "200"
    dup = [w for w in cfg.warnings if "more than once" in w.message]
    assert len(dup) == 1 and (dup[0].line, dup[0].col) == (3, 1)
    assert "previous at <string>:1" in dup[0].message


def test_ignored_slurm_keys_are_kept() -> None:
    cfg = parse_config_text("SelectType=select/cons_tres\nproctracktype=proctrack/cgroup\n")
    assert cfg.ignored == ("SelectType", "ProctrackType")
    assert cfg.settings == (("SelectType", "select/cons_tres"),
                            ("ProctrackType", "proctrack/cgroup"))
    assert cfg.warnings == ()


def test_unknown_key_warns_or_fails_under_strict() -> None:
    cfg = parse_config_text("SlurmdTimout=30\n")
    (w,) = cfg.warnings
    assert "unknown key 'SlurmdTimout'; did you mean 'SlurmdTimeout'?" in w.message
    assert cfg.timeouts.slurmd_timeout == 300
    e = one_error("SlurmdTimout=30\n", strict=True)
    assert (e.line, e.col) == (1, 1) and "did you mean 'SlurmdTimeout'" in e.message


@pytest.mark.parametrize(
    ("line", "col", "needle"),
    [("SlurmdTimeout=soon", 15, "not a whole number"),
     ("ReturnToService=3", 17, "out of range (0..2)"),
     ("NodeApproval=sometimes", 14, "AUTO MANUAL"),
     ("HealthCheckNodeState=IDLE,BUSY", 27, "unknown value 'BUSY'"),
     ("SuspendExcStates=DOWN,BOGUS", 23, "unknown value 'BOGUS'"),
     ("SlurmctldPort=0", 15, "out of range"),
     ("HeartbeatInterval=0", 19, "out of range")],
)
def test_bad_global_values(line: str, col: int, needle: str) -> None:
    e = one_error(line + "\n")
    assert (e.line, e.col) == (1, col) and needle in e.message, e.format()


def test_job_settings_and_power_save_interval_are_typed() -> None:
    """KillWait, MinJobAge, MaxJobCount, MaxArraySize and SlurmctldParameters'
    power_save_interval reach ctld as typed fields, with Slurm's defaults."""
    cfg = parse_config_text("")
    j = cfg.jobs
    assert (j.kill_wait, j.min_job_age, j.max_job_count, j.max_array_size) == (30, 300, 10000,
                                                                               1001)
    assert cfg.power.save_interval == 10
    cfg = parse_config_text("KillWait=5\nMinJobAge=60\nMaxJobCount=50\nMaxArraySize=0\n"
                            "SlurmctldParameters=enable_configless,power_save_interval=3\n")
    j = cfg.jobs
    assert (j.kill_wait, j.min_job_age, j.max_job_count, j.max_array_size) == (5, 60, 50, 0)
    assert cfg.power.save_interval == 3
    assert parse_config_text(
        "SlurmctldParameters=power_save_interval=0\n").power.save_interval == 1
    cfg = parse_config_text("SlurmctldParameters=power_save_interval=soon\n")
    assert cfg.power.save_interval == 10
    assert any("power_save_interval" in w.message for w in cfg.warnings)
    assert "KillWait" in one_error("KillWait=-1\n").message
    assert "MaxJobCount" in one_error("MaxJobCount=0\n").message
