"""The whole suite's hooks: failing tests leave their daemon logs in one place (tests/logkeeper)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import logkeeper

_kept: list[tuple[str, Path]] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    logkeeper.begin_test()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    if any(nodeid == item.nodeid for nodeid, _ in _kept):
        return  # a test failing in call and in teardown is kept once
    extra = []
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if isinstance(tmp, Path):
        extra.append(tmp)
    where = logkeeper.keep(item.nodeid, extra)
    if where is not None:
        _kept.append((item.nodeid, where))
        report.sections.append(("kept logs", f"daemon logs kept in {where}"))


def pytest_terminal_summary(terminalreporter) -> None:
    if not _kept:
        return
    terminalreporter.section("logs of failing tests")
    for nodeid, where in _kept:
        terminalreporter.write_line(f"{nodeid}: {where}")
    terminalreporter.write_line(f"(all under {logkeeper.target()})")
