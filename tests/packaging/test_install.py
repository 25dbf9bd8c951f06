"""A regular `pip install` of the wheel into a fresh venv, beside python-statemachine: only
`ranch` lands in site-packages, neither project breaks the other, and the installed daemons and
every command start and answer (run from outside the source tree, so nothing of it is used)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ranch.protocol import heap
from tests.ports import free_port as _free_port

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("rinfo", "rqueue", "rbatch", "rcancel", "rcontrol", "racct", "rrun", "ralloc")
CONF = """\
ClusterName=installed
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
AuthKeyFile={key}
NodeName=n1 CPUs=2 RealMemory=100
PartitionName=main Nodes=n1 Default=YES
"""


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 300),
                          **kw)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("installed")
    wheels = where / "wheels"
    # from a copy of the tree, as tests/deploy builds: setuptools builds in the source tree's
    # build/, which a build of the checkout itself would share with anything else building it
    from tests.deploy.hosts import export_tree

    tree = export_tree(where / "src")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                  str(tree)], cwd=where)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("ranch-*.whl")
    env = where / "venv"
    made = _run([sys.executable, "-m", "venv", str(env)])
    assert made.returncode == 0, made.stderr
    pip = _run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel),
                "python-statemachine"], cwd=where)
    if pip.returncode != 0 and ("No matching distribution" in pip.stderr
                                or "Could not find a version" in pip.stderr):
        pytest.skip(f"python-statemachine or a dependency cannot be installed here: "
                    f"{pip.stderr.strip().splitlines()[-1]}")
    assert pip.returncode == 0, pip.stderr[-3000:]
    return env


def _site_packages(env: Path) -> Path:
    (site,) = (env / "lib").glob("python3*/site-packages")
    return site


def test_only_ranch_lands_in_site_packages(venv: Path) -> None:
    site = _site_packages(venv)
    (info,) = site.glob("ranch-*.dist-info")
    tops = set()
    for line in (info / "RECORD").read_text().splitlines():
        path = line.split(",", 1)[0]
        if path.startswith(".."):  # the programs, in the venv's bin/
            continue
        tops.add(path.split("/", 1)[0])
    assert tops == {"ranch", info.name}, sorted(tops)
    for name in ("cli", "conf", "ctld", "healthcheck", "noded", "protocol"):
        assert not (site / name).exists(), f"{name} in site-packages"


def test_python_statemachine_is_left_whole(venv: Path) -> None:
    code = ("import statemachine; from statemachine import State, StateMachine; "
            "import ranch.statemachine.table as t; print(len(t.TABLE) > 0)")
    done = _run([str(venv / "bin" / "python"), "-c", code], cwd=venv)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr


def test_man_pages_and_units_are_installed(venv: Path) -> None:
    """Every page of man/ and both units land under the venv's share/, where
    docs/admin-guide.md links them from (`man rctld`, systemd-analyze verify need them)."""
    pages = sorted(p.relative_to(REPO) for p in REPO.glob("man/man[18]/*.[18]"))
    assert {"man/man8/rctld.8", "man/man8/rnoded.8"} <= {str(p) for p in pages}
    for page in pages:
        installed = venv / "share" / page
        assert installed.read_bytes() == (REPO / page).read_bytes(), installed
    units = venv / "share" / "ranch" / "systemd"
    assert sorted(u.name for u in units.iterdir()) == ["rctld.service", "rnoded.service"]


def _wait(cond, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_installed_daemons_and_every_command_run(venv: Path, tmp_path: Path) -> None:
    bin_ = venv / "bin"
    port = _free_port()
    key = tmp_path / "ranch.key"
    made = _run([str(bin_ / "python"), "-c",
                 f"from ranch.protocol.auth import create_key; create_key({str(key)!r})"],
                cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    conf = tmp_path / "cluster.conf"
    conf.write_text(CONF.format(port=port, key=key))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANCH_", "PYTHON", "SLURM_", "VIRTUAL_ENV"))}
    env.update(PATH=f"{bin_}:{env.get('PATH', '')}", RANCH_SERVER=f"127.0.0.1:{port}",
               RANCH_KEY_FILE=str(key))
    logs = {name: open(tmp_path / f"{name}.log", "wb") for name in ("rctld", "rnoded")}
    procs = [subprocess.Popen([str(bin_ / "rctld"), "-f", str(conf), "--state-dir",
                               str(tmp_path / "state")], cwd=tmp_path, env=env,
                              stdout=logs["rctld"], stderr=logs["rctld"])]
    try:
        _wait(lambda: _run([str(bin_ / "rinfo")], cwd=tmp_path, env=env).returncode == 0,
              "the installed rctld to answer rinfo")
        procs.append(subprocess.Popen(
            [str(bin_ / "rnoded"), "--server", f"127.0.0.1:{port}", "--name", "n1",
             "--key-file", str(key), "--spool-dir", str(tmp_path / "spool")],
            cwd=tmp_path, env=env, stdout=logs["rnoded"], stderr=logs["rnoded"]))
        _wait(lambda: "idle" in _run([str(bin_ / "rinfo"), "-h", "-o", "%t"], cwd=tmp_path,
                                     env=env).stdout, "n1 to register")
        # the installed daemons chose their heap (ranch/protocol/heap.py): re-executed in place
        libc, thp = heap.facts()
        if heap.plan(env, platform=sys.platform, libc=libc, thp=thp) is not None:
            for p in procs:
                started = open(f"/proc/{p.pid}/environ").read().split("\0")
                assert "PYTHONMALLOC=malloc" in started, p.args[0]
        said = {}
        for argv in (["rinfo"], ["rqueue"], ["rcontrol", "show", "node", "n1"],
                     ["rbatch", "-H", "-o", "/dev/null", "--wrap", "true"], ["racct", "-X"],
                     ["rrun", "-N1", "echo", "ran"], ["ralloc", "-N1", "true"]):
            done = _run([str(bin_ / argv[0]), *argv[1:]], cwd=tmp_path, env=env, timeout=120)
            assert done.returncode == 0, (argv, done.stdout, done.stderr)
            said[argv[0]] = done.stdout
        assert "main*" in said["rinfo"] and "NodeName=n1" in said["rcontrol"]
        assert said["rbatch"].startswith("Submitted batch job ")
        assert said["rrun"].strip() == "ran"
        jid = said["rbatch"].split()[-1]
        cancel = _run([str(bin_ / "rcancel"), jid], cwd=tmp_path, env=env)
        assert cancel.returncode == 0, cancel.stderr
        assert set(COMMANDS) <= set(said) | {"rcancel"}
        health = _run([str(bin_ / "ranch-healthcheck"), "--help"], cwd=tmp_path, env=env)
        assert health.returncode == 0, health.stderr
        shims = _run([str(bin_ / "ranch-slurm-shims"), str(tmp_path / "shims")], cwd=tmp_path,
                     env=env)
        assert shims.returncode == 0, shims.stderr
        sinfo = _run([str(tmp_path / "shims" / "sinfo"), "-h", "-o", "%P"], cwd=tmp_path,
                     env=env)
        assert sinfo.returncode == 0 and "main" in sinfo.stdout, sinfo.stderr
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs.values():
            f.close()
    assert shutil.which("rctld", path=str(bin_))
