"""`make demo` as a newcomer runs it: an ordinary user (alice; the test drops to her, CI runs as
root) in a clean copy of the tree, with a Python of her own. The install is ranch alone (no
[test] extra); the running demo writes nothing outside its run dir (its TMPDIR holds that and
nothing else, her home and the tree get nothing but the install's files); it reports the one
version; the user guide's `rrun -n8 --gpus-per-task=1` runs on it; and Ctrl-C stops it
cleanly, leaving nothing behind."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import ranch
from ranch.conf.keys import GLOBAL_KEYS
from tests.demo.running import GONE_WITHIN, REPO, RunningDemo

USER = "alice"
UP_WITHIN = 300.0  # a venv and `pip install .` (5 s here from a local index), then the cluster
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# What `make demo` itself leaves in the tree: the venv, the bytecode compileall writes, and the
# editable install's metadata; `demo.out` is this test's record of the demo's output.
BUILD_OUTPUT = re.compile(r"(\.venv|.*/__pycache__|[^/]*\.egg-info)(/.*)?|demo\.out")


def _user_runs(python: str, user: str) -> bool:
    if not os.access(python, os.X_OK):
        return False
    try:
        done = subprocess.run([python, "-c", "import sys, venv, ensurepip; "
                               "assert sys.version_info >= (3, 11)"], user=user, group=user,
                              extra_groups=[], cwd="/", capture_output=True, timeout=60,
                              env={"PATH": SYSTEM_PATH})
    except PermissionError:  # under a directory only root may enter (/root/.pyenv)
        return False
    return done.returncode == 0


def _python_for(user: str) -> str:
    """A Python 3.11+ with venv that `user` may run (ours may live under root's home)."""
    for python in (sys.executable, *(shutil.which(n, path=SYSTEM_PATH) or ""
                                     for n in ("python3", "python3.12", "python3.11"))):
        if python and _user_runs(python, user):
            return os.path.realpath(python)
    pytest.skip(f"no Python 3.11+ with venv that {user} may run")


def _tree_files(tree: Path) -> set[str]:
    return {str(p.relative_to(tree)) for p in tree.rglob("*")}


def _clean_copy(dest: Path) -> None:
    """The files a clone holds (tracked, and new ones not ignored), without any build output."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO, capture_output=True,
                            check=True).stdout.split(b"\0")
    for name in filter(None, listed):
        src = REPO / os.fsdecode(name)
        if src.is_file():
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target, follow_symlinks=False)


def _new_entries(where: str, uid: int, since: float) -> list[str]:
    """What `uid` made directly in a shared scratch directory since `since`."""
    out = []
    with os.scandir(where) as it:
        for entry in it:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid == uid and st.st_mtime >= since:
                out.append(entry.path)
    return out


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory the user owns, outside root's private pytest tmp (mode 0700)."""
    if os.geteuid() != 0:
        pytest.skip("dropping to another user needs root")
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        pytest.skip(f"no user {USER}")
    if not shutil.which("make"):
        pytest.skip("needs make")
    path = Path(tempfile.mkdtemp(prefix="ranch-demo-user-"))
    path.chmod(0o755)
    try:
        for sub in ("tree", "home", "tmp"):
            (path / sub).mkdir()
        _clean_copy(path / "tree")
        subprocess.run(["chown", "-R", f"{pw.pw_uid}:{pw.pw_gid}", str(path)], check=True)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _as_user(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, user=USER, group=USER, extra_groups=[],
                          capture_output=True, text=True, timeout=120)


def test_example_config_keeps_only_what_ranch_does_not_act_on() -> None:
    """slurm-like.conf's block of Slurm keys "kept but not acted on" says true: acting on one of
    them (SlurmctldLogFile=/var/log/...) stopped the demo for any user but root."""
    text = (REPO / "examples" / "slurm-like.conf").read_text()
    block = text.split("# Slurm keys Ranch keeps", 1)[1].split("\n", 1)[1].split("\n\n", 1)[0]
    keys = [line.split("=", 1)[0] for line in block.splitlines()
            if line and not line.startswith("#")]
    assert keys, block
    acted = [k for k in keys if GLOBAL_KEYS[k.lower()].acted]
    assert not acted, acted


def test_make_demo_as_an_ordinary_user(base: Path) -> None:
    python = _python_for(USER)
    pw = pwd.getpwnam(USER)
    tree, home, tmp = base / "tree", base / "home", base / "tmp"
    before = _tree_files(tree)
    env = {"HOME": str(home), "USER": USER, "LOGNAME": USER, "TMPDIR": str(tmp),
           "LANG": "C.UTF-8", "PATH": f"{Path(python).parent}:{SYSTEM_PATH}",
           # where this machine's pip finds packages (an index, a wheel folder), if it says
           **{k: v for k, v in os.environ.items() if k.startswith("PIP_")}}
    started = time.time() - 1
    demo = RunningDemo(tree, ["make", "--no-print-directory", "demo", f"PY={python}"],
                       user=USER, env=env)
    try:
        got = demo.wait_up(within=UP_WITHIN)
        out = demo.output()
        # ranch alone: none of the [test] extra (pytest, mypy, ruff, hypothesis, ...)
        assert "-e .\n" in out and "[test]" not in out, out
        site = next((tree / ".venv" / "lib").glob("python3*/site-packages"))
        installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
        assert "ranch" in installed and not installed & {"pytest", "mypy", "ruff", "hypothesis"}
        assert not (tree / ".venv" / ".installed").exists()  # make test's stamp: not this one

        # Everything it writes is in its run dir, in her TMPDIR; nothing else is there.
        run_dir = Path(got["RANCH_DEMO_DIR"])
        assert run_dir.parent == tmp and run_dir.stat().st_uid == pw.pw_uid
        assert os.listdir(tmp) == [run_dir.name]
        assert (run_dir / "rctld.log").stat().st_size > 0  # the log is here (stderr), ...
        user_env = {**env, **got}
        config = _as_user([str(tree / ".venv" / "bin" / "rcontrol"), "show", "config"],
                          user_env, run_dir)
        assert config.returncode == 0, config.stderr
        shown = dict(re.findall(r"(?m)^(\w+)\s+= (.*)$", config.stdout))
        assert shown["SlurmctldLogFile"] == "(null)", shown  # ... not in /var/log
        assert shown["SlurmdLogFile"] == "(null)", shown
        assert shown["StateSaveLocation"] == f"{run_dir}/state"

        # One version everywhere: the programs, the controller's ping, the HTTP API's documents.
        version = _as_user([str(tree / ".venv" / "bin" / "rinfo"), "--version"], user_env, tree)
        assert version.stdout.startswith(f"ranch {ranch.__version__} "), version.stdout
        ping = _as_user([str(tree / ".venv" / "bin" / "rcontrol"), "ping"], user_env, tree)
        assert ping.returncode == 0, ping.stderr
        with urllib.request.urlopen(f"{got['RANCH_URL']}/api/v1/nodes", timeout=30) as reply:
            doc = json.load(reply)
        assert doc["meta"]["slurm"]["release"] == ranch.__version__, doc["meta"]

        # A job submitted from the run dir (the line the demo prints ends `cd "$RANCH_DEMO_DIR"`)
        # writes its output there.
        job = _as_user([str(tree / ".venv" / "bin" / "rbatch"), "--wrap", "echo hello"],
                       user_env, run_dir)
        assert job.stdout.startswith("Submitted batch job "), job.stderr
        job_id = job.stdout.split()[-1]
        deadline = time.monotonic() + 60
        while not (run_dir / f"slurm-{job_id}.out").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (run_dir / f"slurm-{job_id}.out").exists(), sorted(os.listdir(run_dir))

        # The user guide's `rrun -n8 --gpus-per-task=1 ...` on the demo's gpu partition (four
        # nodes of 2 CPUs and 4 GPUs): two tasks a node, each with a GPU of its own.
        guide = (REPO / "docs" / "user-guide.md").read_text()
        assert "\nrrun -n8 --gpus-per-task=1 python train.py" in guide
        step = _as_user([str(tree / ".venv" / "bin" / "rrun"), "-n8", "--gpus-per-task=1", "sh",
                         "-c", 'echo "$SLURM_PROCID $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"'],
                        user_env, run_dir)
        assert step.returncode == 0, (step.stdout, step.stderr)
        rows = sorted(line.split() for line in step.stdout.splitlines())
        assert sorted(int(r[0]) for r in rows) == list(range(8)), rows
        by_node: dict[str, list[str]] = {}
        for _, node, gpu in rows:
            by_node.setdefault(node, []).append(gpu)
        assert sorted(by_node) == ["gpu01", "gpu02", "gpu03", "gpu04"], rows
        assert all(len(set(gpus)) == 2 and "," not in "".join(gpus)
                   for gpus in by_node.values()), rows

        # Ctrl-C in her terminal: the demo stops everything and removes its directory.
        os.killpg(demo.proc.pid, signal.SIGINT)
        demo.proc.wait(GONE_WITHIN)
        assert "demo: stopped rctld, 12 nodes" in demo.output(), demo.output()
        assert not demo.survivors(), demo.output()
        assert os.listdir(tmp) == [], os.listdir(tmp)
        assert not demo.link.exists() and not demo.link.is_symlink()
        # Her home: at most pip's download cache, from the install. The tree: only build output.
        assert {str(p.relative_to(home)) for p in home.rglob("*")} <= {
            str(p.relative_to(home)) for p in home.glob(".cache/pip/**")} | {".cache", ".cache/pip"}
        made = sorted(f for f in _tree_files(tree) - before if not BUILD_OUTPUT.fullmatch(f))
        assert made == [], made
        for scratch in ("/var/tmp", "/dev/shm"):
            if os.path.isdir(scratch):
                assert _new_entries(scratch, pw.pw_uid, started) == [], scratch
    finally:
        demo.kill_all()
