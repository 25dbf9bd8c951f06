"""Settings slurmctld 22.05 refuses at start: Ranch warns (errors under --strict) with what
slurmctld logs, so that `rctld --check` also says whether Slurm itself would start."""

from pathlib import Path

import pytest

from ranch.conf.build import parse_config_text
from ranch.ctld.check import run_check
from ranch.ctld.main import build_parser

from .helpers import one_error

BASE = "NodeName=n[1-2] CPUs=4\nPartitionName=p Nodes=ALL Default=YES\n"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("FastSchedule=0", "The FastSchedule option has been removed. Please update"),
        ("FastSchedule=2", "SlurmdParameters=config_overrides"),
        ("CacheGroups=0", "unrecognized key: CacheGroups"),
        ("JobCheckpointDir=/var/slurm/checkpoint", "unrecognized key: JobCheckpointDir"),
        ("SchedulerPort=7321", "unrecognized key: SchedulerPort"),
        ("AccountingStorageLoc=/var/log/slurm/accounting", "AccountingStorageLoc option has been"),
        ("AccountingStoreJobComment=YES", "AccountingStoreFlags=job_comment"),
        ("MemLimitEnforce=no", "unrecognized key: MemLimitEnforce"),
        ("DefaultStorageType=accounting_storage/none", "unrecognized key: DefaultStorageType"),
        ("DefaultStorageHost=localhost", "unrecognized key: DefaultStorageHost"),
        ("TaskPluginParam=Sched", "Bad TaskPluginParam: Sched"),
        ("TaskPluginParam=Cores,sched", "Bad TaskPluginParam: sched"),
    ],
)
def test_refused_setting_warns_then_errors_under_strict(line: str, said: str) -> None:
    text = f"ClusterName=x\n{line}\n{BASE}"
    cfg = parse_config_text(text)
    (w,) = cfg.warnings
    assert (w.line, w.col, w.severity) == (2, 1, "warning")
    assert w.message.startswith("slurmctld 22.05 refuses this: ") and said in w.message
    e = one_error(text, strict=True)
    assert (e.line, e.message) == (2, w.message)


@pytest.mark.parametrize("line", ["FastSchedule=1", "TaskPluginParam=Cores,Verbose"])
def test_settings_slurm_starts_with_are_not_refused(line: str) -> None:
    cfg = parse_config_text(f"{line}\n{BASE}", strict=True)
    assert all("refuses" not in w.message for w in cfg.warnings)


def test_fast_schedule_1_is_only_logged() -> None:
    (w,) = parse_config_text(f"FastSchedule=1\n{BASE}").warnings
    assert "slurmctld 22.05 logs: Ignoring obsolete FastSchedule=1" in w.message


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "slurm.conf"
    path.write_text(text)
    return str(path)


def test_check_warns_without_partitions_and_strict_refuses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "ClusterName=x\nNodeName=n1\n")
    assert run_check(path) == 1  # slurmctld's exit status
    err = capsys.readouterr().err
    assert "slurmctld 22.05 refuses this: No PartitionName information available!" in err
    assert run_check(path, strict=True) == 2
    err = capsys.readouterr().err
    assert "No PartitionName information available!" in err and "config not valid" in err


def test_check_reports_each_refusal_with_file_and_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, f"CacheGroups=0\nFastSchedule=0\n{BASE}")
    assert run_check(path) == 1  # slurmctld's exit status
    err = capsys.readouterr().err
    assert f"{path}:1:1: warning: slurmctld 22.05 refuses this:" in err
    assert f"{path}:2:1: warning: slurmctld 22.05 refuses this:" in err
    assert run_check(path, strict=True) == 2
    assert "2 errors, config not valid" in capsys.readouterr().err


def test_help_describes_strict_as_it_behaves() -> None:
    text = " ".join(build_parser().format_help().split())
    assert "unknown keys and settings that slurmctld 22.05 refuses at start are errors" in text


def test_partition_key_newer_than_22_05() -> None:
    text = "NodeName=n1\nPartitionName=p Nodes=n1 MaxCPUsPerSocket=2\n"
    (w,) = parse_config_text(text).warnings
    assert (w.line, w.col) == (2, 26)
    assert w.message == ("slurmctld 22.05 refuses this: Parsing error at unrecognized key: "
                         "MaxCPUsPerSocket")
    assert one_error(text, strict=True).line == 2
