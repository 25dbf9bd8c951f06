"""Commands find the controller from the installed config: RANCH_CONF, else
/etc/ranch/cluster.conf, with every SlurmctldHost kept in order (the controllers a command
tries)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ranch.cli import controller
from ranch.cli.controller import CliError, find_target

SITE = ("ClusterName=site\nSlurmctldHost=ctl1(10.202.0.2)\nSlurmctldHost=ctl2(10.202.0.3)\n"
        "SlurmctldPort=6900\nAuthKeyFile=ranch.key\nNodeName=n[1-2] CPUs=1\n")


def test_every_controller_in_order(tmp_path: Path) -> None:
    path = tmp_path / "cluster.conf"
    path.write_text(SITE)
    t = find_target(None, None, None, {"RANCH_CONF": str(path)})
    assert (t.host, t.port) == ("10.202.0.2", 6900)
    assert t.controllers == (("ctl1", "10.202.0.2", 6900), ("ctl2", "10.202.0.3", 6900))
    assert t.key_path == str(tmp_path / "ranch.key")
    assert t.origin == f"config {path}"


def test_the_installed_file_when_nothing_names_one(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    installed = tmp_path / "etc" / "ranch" / "cluster.conf"
    monkeypatch.setattr(controller, "INSTALLED_CONF", str(installed))
    assert find_target(None, None, None, {}).origin == "the default"  # none installed
    installed.parent.mkdir(parents=True)
    installed.write_text(SITE)
    t = find_target(None, None, None, {})
    assert (t.host, t.port, t.origin) == ("10.202.0.2", 6900, f"config {installed}")
    other = tmp_path / "other.conf"
    other.write_text("SlurmctldHost=elsewhere\n")
    assert find_target(None, None, None, {"RANCH_CONF": str(other)}).host == "elsewhere"
    # SLURM_CONF belongs to Slurm's own commands (cli/controller.py says why)
    assert find_target(None, None, None, {"SLURM_CONF": str(other)}).host == "10.202.0.2"


def test_a_broken_config_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "cluster.conf"
    path.write_text("SlurmctldHost=ctl1\n\nSlurmctldPort=99999\n")
    with pytest.raises(CliError) as err:
        find_target(None, None, str(path), {})
    assert err.value.message == (f"cannot read config {path}:3: SlurmctldPort: 99999 is out "
                                 "of range (1..65535)")
    with pytest.raises(CliError) as err:
        find_target(None, None, str(tmp_path / "missing.conf"), {})
    assert err.value.message == (f"cannot read config {tmp_path}/missing.conf: No such file or "
                                 "directory")


def _two_free_ports() -> int:
    """A port whose next one is free too (other tests and daemons take ports meanwhile)."""
    import socket

    for _ in range(50):
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            low = a.getsockname()[1]
            try:
                b.bind(("127.0.0.1", low + 1))
            except OSError:
                continue
            return low
    raise AssertionError("no two consecutive free ports on 127.0.0.1")


def test_rrun_listens_within_srun_port_range(tmp_path: Path) -> None:
    """SrunPortRange is what a site's firewall opens on submit hosts: rrun's listener for its
    tasks' I/O takes a port inside it, or says the range is full."""

    from ranch.cli.step_launch import listen_for_tasks

    path = tmp_path / "cluster.conf"
    low = _two_free_ports()
    path.write_text(f"SlurmctldHost=ctl\nSrunPortRange={low}-{low + 1}\n")
    ports = find_target(None, None, str(path), {}).srun_ports
    assert ports == (low, low + 1)
    held = []
    try:
        for _ in range(2):
            held.append(listen_for_tasks("127.0.0.1", ports))
        assert sorted(s.getsockname()[1] for s in held) == [low, low + 1]
        with pytest.raises(CliError, match=f"no free port in SrunPortRange={low}-{low + 1}"):
            listen_for_tasks("127.0.0.1", ports)
    finally:
        for s in held:
            s.close()
