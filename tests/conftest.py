"""The whole suite's hooks: failing tests leave their daemon logs in one place (tests/logkeeper),
and under pytest-xdist (`make test` runs two workers) tests that share a machine-wide resource or
an expensive fixture go to one worker together (xdist_group, with --dist loadgroup)."""

from __future__ import annotations

import fcntl
import os
import re
import time
from pathlib import Path

import pytest

from tests import logkeeper

_kept: list[tuple[str, str]] = []
# Folders whose tests build network-namespace labs: the namespace names, bridge and subnets are
# fixed (tests/ha/lab.py, tests/deploy/hosts.py), so two such labs at once would collide.
NETNS_DIRS = ("tests/ha/", "tests/deploy/")
# Held while a module of those runs, so that two runs on one machine (two checkouts, or a run and
# someone's `flock /tmp/ranch-netns.lock pytest tests/ha`) never build labs at once.
NETNS_LOCK = "/tmp/ranch-netns.lock"
_HELD_ENV = "RANCH_NETNS_LOCK_HELD"  # set for xdist's workers when the lock came from above
NETNS_LOCK_WAIT = 1800.0  # seconds another run's labs may keep us waiting


def _lock_inherited() -> bool:
    """Whether this process already holds NETNS_LOCK: `flock FILE pytest ...` passes its locked
    descriptor down (taking it again on a new descriptor would wait for ourselves)."""
    if os.environ.get(_HELD_ENV) == "1":
        return True
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == NETNS_LOCK:
                return True
        except OSError:
            continue
    return False


def pytest_configure(config) -> None:
    # xdist's workers start with only stdin/out/err: tell them the lock is ours already
    if _lock_inherited():
        os.environ[_HELD_ENV] = "1"


@pytest.fixture(scope="module", autouse=True)
def _netns_lock(request):
    """NETNS_LOCK for the whole module, when it builds namespace labs."""
    if not request.node.nodeid.startswith(NETNS_DIRS) or _lock_inherited():
        yield
        return
    fd = os.open(NETNS_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        began = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - began > NETNS_LOCK_WAIT:
                    pytest.fail(f"{NETNS_LOCK} held by another run for {NETNS_LOCK_WAIT:g} s")
                time.sleep(1.0)
        yield
    finally:
        os.close(fd)  # releases the lock


def xdist_group(item) -> str:
    """Which worker-group `item` belongs to: the namespace labs all in one; every test that
    uses one of the suite's session-scoped fixtures (the conformance results: two real clusters
    and every scenario, minutes) in one, so it is built once; else the test's module, so a
    module-scoped fixture (a cluster per module) is built once too."""
    path = item.nodeid.split("::", 1)[0]
    if path.startswith(NETNS_DIRS):
        return "netns"
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for fixturedefs in defs.values():
        if any(d.scope == "session" and str(d.baseid).startswith("tests") for d in fixturedefs):
            return "session-fixtures"
    return path


def pytest_itemcollected(item) -> None:
    if item.config.pluginmanager.hasplugin("xdist"):  # else a venv made before pytest-xdist
        item.add_marker(pytest.mark.xdist_group(xdist_group(item)))


# pytest-xdist 3.8's loadgroup writes the group into Item._nodeid, which pytest 9 no longer
# reads (Node.nodeid is its _id now): the marks above never reach the scheduler, and every test
# went to any worker (two builds of test_install's wheel in one build/ at once). So the
# controller groups by node id itself, as xdist_group() does from the item: the same groups.
_SESSION_USE = re.compile(r"def test_\w+\([^)]*\b(?:step_)?results\b", re.S)
_session_modules: dict[str, bool] = {}


def scope_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path.startswith(NETNS_DIRS):
        return "netns"
    if path.startswith("tests/conformance/"):
        if path not in _session_modules:
            try:
                text = (logkeeper.REPO / path).read_text()
            except OSError:
                text = ""
            _session_modules[path] = bool(_SESSION_USE.search(text))
        if _session_modules[path]:
            return "session-fixtures"
    return path


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") not in ("loadgroup", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return Groups(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    logkeeper.begin_test()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    if getattr(item, "_logs_kept", False):
        return  # a test failing in call and in teardown is kept once
    extra = []
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if isinstance(tmp, Path):
        extra.append(tmp)
    where = logkeeper.keep(item.nodeid, extra)
    if where is not None:
        item._logs_kept = True
        report.sections.append(("kept logs", f"daemon logs kept in {where}"))


def pytest_runtest_logreport(report) -> None:
    # read back from the report, not from the hook above: under xdist the report is made in a
    # worker and this runs in the process that prints the summary
    for name, text in getattr(report, "sections", ()):
        if name == "kept logs" and all(nodeid != report.nodeid for nodeid, _ in _kept):
            _kept.append((report.nodeid, text.removeprefix("daemon logs kept in ")))


def pytest_terminal_summary(terminalreporter) -> None:
    if not _kept:
        return
    terminalreporter.section("logs of failing tests")
    for nodeid, where in _kept:
        terminalreporter.write_line(f"{nodeid}: {where}")
    terminalreporter.write_line(f"(all under {logkeeper.target()})")
