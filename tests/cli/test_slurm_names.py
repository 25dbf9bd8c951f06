"""Slurm's names, opt in: `ranch-slurm-shims DIR` writes sbatch, squeue, scancel, sinfo,
scontrol, sacct and srun into DIR; run through them, Ranch's commands answer `--version` as
tools parse it and speak with the Slurm name. Nothing outside DIR is touched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ranch.cli.slurm_names import COMMANDS

REPO = Path(__file__).resolve().parents[2]


def shims(directory: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ranch.cli.shims", str(directory), *extra],
                          cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=60)


def call(directory: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{directory}{os.pathsep}{os.environ.get('PATH', '')}",
           "RANCH_SERVER": "127.0.0.1:1"}  # nothing listens: no command here needs rctld
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60,
                          cwd="/")


@pytest.fixture(scope="module")
def bindir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("shims") / "bin"
    done = shims(directory)
    assert done.returncode == 0, done.stderr
    assert f"export PATH={directory}:$PATH" in done.stdout
    return directory


def test_every_name_is_written_and_executable(bindir: Path) -> None:
    assert sorted(p.name for p in bindir.iterdir()) == sorted(COMMANDS)
    assert all(os.access(bindir / name, os.X_OK) for name in COMMANDS)


@pytest.mark.parametrize("argv", [["sbatch", "--version"], ["sbatch", "-V"], ["squeue", "-V"],
                                  ["scancel", "--version"], ["sinfo", "-V"],
                                  ["scontrol", "--version"], ["scontrol", "version"],
                                  ["sacct", "-V"], ["srun", "--version"]])
def test_version_is_what_tools_parse(bindir: Path, argv: list[str]) -> None:
    done = call(bindir, *argv)
    assert (done.returncode, done.stdout, done.stderr) == (0, "slurm 22.05.8\n", "")


def test_ranch_names_tell_a_person_both_versions() -> None:
    done = subprocess.run([sys.executable, "-m", "ranch.cli.rqueue", "--version"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout == "ranch 0.2.0 (rqueue; speaks as slurm 22.05.8)\n"


def test_messages_speak_with_the_slurm_name(bindir: Path) -> None:
    done = call(bindir, "sbatch", "--frobnicate")
    assert done.returncode == 255  # sbatch, srun, salloc: exit(-1)
    assert done.stderr.startswith("sbatch: error: unrecognized option '--frobnicate'")
    done = call(bindir, "squeue", "--frobnicate")  # squeue's getopt_long, as glibc words it
    assert done.returncode == 1 and done.stderr.startswith(
        "squeue: unrecognized option '--frobnicate'")
    done = call(bindir, "scancel")
    assert done.stderr.startswith("scancel: error: No job identification provided")
    done = call(bindir, "sbatch", "--help")
    assert done.stdout.startswith("Usage: sbatch [OPTIONS...] executable [args...]")


def test_a_file_it_did_not_write_is_never_replaced(tmp_path: Path) -> None:
    directory = tmp_path / "bin"
    directory.mkdir()
    (directory / "sbatch").write_text("#!/bin/sh\necho the real one\n")
    done = shims(directory)
    assert done.returncode != 0 and "not written by ranch-slurm-shims" in done.stderr
    assert (directory / "sbatch").read_text() == "#!/bin/sh\necho the real one\n"
    assert not (directory / "squeue").exists()
    assert shims(directory, "--force").returncode == 0
    assert shims(directory, "--remove").returncode == 0
    assert list(directory.iterdir()) == []


def test_exported_bash_functions_pass_through(tmp_path: Path) -> None:
    """No shell stands between the caller and Ranch: dash drops variables whose names are no
    shell names, so `export -f module` (Lmod's BASH_FUNC_module%%) would never reach a job.
    The shim's interpreter is replaced by one that prints what it was given."""
    from ranch.cli import shims as shim_module

    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "print(json.dumps([sys.argv[1:], dict(os.environ)]))\n")
    fake.chmod(0o755)
    shim_module.write(tmp_path / "bin", python=str(fake))
    done = subprocess.run(["bash", "-c", "module() { echo loaded; }; export -f module; "
                           f"exec {tmp_path / 'bin' / 'sbatch'} --wrap true"],
                          capture_output=True, text=True, timeout=60)
    import json

    argv, env = json.loads(done.stdout)
    assert argv[0] == "-I" and argv[-2:] == ["--wrap", "true"]
    assert env["BASH_FUNC_module%%"].startswith("() {")


def test_scontrol_errors_name_scontrol(bindir: Path) -> None:
    """rcontrol's own error lines say `scontrol:` under that name (here: hostnames with no
    list and no SLURM_NODELIST: an error, exit 0, as scontrol 22.05)."""
    env_free = call(bindir, "env", "-u", "SLURM_NODELIST", "scontrol", "show", "hostnames")
    assert env_free.returncode == 0, env_free.stderr
    assert env_free.stderr == "scontrol: error: host list is empty\n"
    listed = call(bindir, "env", "SLURM_NODELIST=c[1-3]", "scontrol", "show", "hostnames")
    assert listed.stdout == "c1\nc2\nc3\n"
