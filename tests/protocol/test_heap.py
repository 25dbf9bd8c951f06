"""The daemons' heap (ranch/protocol/heap.py): when a daemon re-executes itself onto glibc's malloc
on huge pages, that it stays one process, and that what it starts inherits nothing of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ranch.protocol import heap

REPO = Path(__file__).resolve().parents[2]
GLIBC = "glibc 2.36"

# A daemon's first lines, then what it is: its pid, its environment as exec'd (/proc) and as
# Python now holds it, what a child inherits, and whether CPython's own allocator is in use
# (_debugmallocstats prints its arenas only then).
PROBE = """
import json, os, subprocess, sys, tempfile
from ranch.protocol.heap import relaunch
relaunch()
started = dict(x.split("=", 1) for x in open("/proc/self/environ").read().split("\\0") if "=" in x)
child = subprocess.run(["env", "-0"], capture_output=True, text=True).stdout
inherited = dict(x.split("=", 1) for x in child.split("\\0") if "=" in x)
stats = subprocess.run([sys.executable, "-c", "import sys; sys._debugmallocstats()"],
                       capture_output=True, text=True).stderr
with tempfile.TemporaryFile() as f:
    saved = os.dup(2)
    os.dup2(f.fileno(), 2)
    sys._debugmallocstats()
    os.dup2(saved, 2)
    f.seek(0)
    own = b"arenas" in f.read()
held = [str(i) * 3 for i in range(300_000)]  # some heap, to see which pages it is on
huge = [int(x.split()[1]) for x in open("/proc/self/smaps_rollup") if x.startswith("AnonHuge")]
print(json.dumps({"pid": os.getpid(), "started": started, "now": dict(os.environ),
                  "inherited": inherited, "pymalloc": own, "child_pymalloc": "arenas" in stats,
                  "huge_kb": huge[0]}))
"""
WATCHED = ("PYTHONMALLOC", "GLIBC_TUNABLES", heap.MARK, heap.WAS)


def test_thp_mode_and_glibc_version_read_from_the_kernel_and_libc_texts() -> None:
    assert heap.thp_mode("always [madvise] never\n") == "madvise"
    assert heap.thp_mode("[always] madvise never") == "always"
    assert heap.thp_mode("always madvise [never]") == "never"
    assert heap.thp_mode("") == ""
    assert heap.glibc_version("glibc 2.36") == (2, 36)
    assert heap.glibc_version("glibc 2.35.1") == (2, 35)
    assert heap.glibc_version("musl 1.2") is None
    assert heap.glibc_version("glibc x.y") is None
    assert heap.glibc_version("") is None


@pytest.mark.parametrize(("environ", "platform", "libc", "thp", "why"), [
    ({"PYTHONMALLOC": "pymalloc"}, "linux", GLIBC, "madvise", "the admin chose the allocator"),
    ({heap.MARK: "1"}, "linux", GLIBC, "madvise", "already re-executed"),
    ({}, "darwin", GLIBC, "madvise", "not Linux"),
    ({}, "linux", "", "madvise", "not glibc"),
    ({}, "linux", "glibc 2.31", "madvise", "a glibc without glibc.malloc.hugetlb"),
    ({}, "linux", GLIBC, "never", "huge pages off"),
    ({}, "linux", GLIBC, "", "no THP file"),
])
def test_no_relaunch(environ: dict, platform: str, libc: str, thp: str, why: str) -> None:
    assert heap.plan(environ, platform=platform, libc=libc, thp=thp) is None, why


@pytest.mark.parametrize("thp", ["madvise", "always"])
def test_relaunch_environment_and_its_restore(thp: str) -> None:
    started = {"PATH": "/bin", "HOME": "/root"}
    env = heap.plan(started, platform="linux", libc=GLIBC, thp=thp)
    assert env == {**started, "PYTHONMALLOC": "malloc", "GLIBC_TUNABLES": heap.TUNABLE,
                   heap.MARK: "1"}
    assert heap.restore(env) is True
    assert env == started
    assert heap.restore(env) is False and env == started


def test_an_admins_tunables_are_kept_and_given_back() -> None:
    started = {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}
    env = heap.plan(started, platform="linux", libc=GLIBC, thp="madvise")
    assert env is not None
    assert env["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{heap.TUNABLE}"
    heap.restore(env)
    assert env == started
    # one that already says what to do with huge pages is left as it is
    own = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}
    env = heap.plan(own, platform="linux", libc=GLIBC, thp="madvise")
    assert env is not None and env["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=0"
    heap.restore(env)
    assert env == own


def _machine_relaunches() -> bool:
    libc, thp = heap.facts()
    clean = {k: v for k, v in os.environ.items() if k not in WATCHED}
    return heap.plan(clean, platform=sys.platform, libc=libc, thp=thp) is not None


def _probe(env: dict[str, str]) -> tuple[int, dict]:
    proc = subprocess.Popen([sys.executable, "-c", PROBE], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    return proc.pid, json.loads(out)


@pytest.mark.parametrize("tunables", [None, "glibc.malloc.arena_max=4"])
def test_a_real_relaunch_is_one_process_on_malloc_and_its_children_see_nothing(
        tunables: str | None) -> None:
    if not _machine_relaunches():
        pytest.skip("this machine has no glibc >= 2.35 with transparent huge pages on")
    env = {k: v for k, v in os.environ.items() if k not in WATCHED}
    env["PYTHONPATH"] = str(REPO)
    if tunables is not None:
        env["GLIBC_TUNABLES"] = tunables
    pid, seen = _probe(env)
    assert seen["pid"] == pid  # exec'd in place: systemd, pid files and kill see one process
    assert seen["started"]["PYTHONMALLOC"] == "malloc"
    # glibc rewrites the variable's text in place as it parses it (/proc shows the first
    # tunable of a list), so what tells is the heap: on huge pages where faults may compact
    assert "GLIBC_TUNABLES" in seen["started"]
    if heap.thp_mode(Path("/sys/kernel/mm/transparent_hugepage/defrag").read_text()) in (
            "always", "madvise", "defer+madvise"):
        assert seen["huge_kb"] > 0
    for where in ("now", "inherited"):
        got = {k: seen[where].get(k) for k in WATCHED}
        assert got == {**dict.fromkeys(WATCHED), "GLIBC_TUNABLES": tunables}, where
    assert not seen["pymalloc"]  # the daemon runs on glibc's malloc
    assert seen["child_pymalloc"]  # a Python child runs on CPython's own allocator again


def test_an_admins_pythonmalloc_is_left_alone() -> None:
    env = {k: v for k, v in os.environ.items() if k not in WATCHED}
    env.update(PYTHONPATH=str(REPO), PYTHONMALLOC="pymalloc")
    _, seen = _probe(env)
    assert seen["started"]["PYTHONMALLOC"] == "pymalloc" and seen["pymalloc"]
    assert "GLIBC_TUNABLES" not in seen["started"] and heap.MARK not in seen["started"]
    assert seen["now"]["PYTHONMALLOC"] == seen["inherited"]["PYTHONMALLOC"] == "pymalloc"
