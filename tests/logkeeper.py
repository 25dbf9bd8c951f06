"""Keeps the daemon logs of failing tests in one folder, so a CI failure can be read afterwards.

Harnesses that start daemons (tests/integration/cluster.py, the conformance clusters, the
namespace labs) call `watch(dir)` with the folder their daemons log into; a test's own tmp_path
is watched without asking. When a test fails (setup, call or teardown), every log-like file under
the folders watched during that test, and under those still open from fixtures of wider scope, is
copied to RANCH_TEST_LOGS (default `test-logs/` at the repository's root), one folder per test.
pytest's own tmp_path retention keeps only three runs and names folders by test function, which
is not enough to tell a flake from a regression after the fact: this keeps what failed, by name.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# files worth keeping: daemon logs and the small text files a harness writes beside them
_KEEP = re.compile(r".*\.(log|out|err|txt|conf|json)$|.*log.*", re.I)
_MAX_FILE = 4 * 1024 * 1024  # a runaway log is kept by its last 4 MiB
_MAX_FILES = 400  # per test

_this_test: list[Path] = []  # folders watched since the current test's setup began
_open: dict[Path, int] = {}  # folders of harnesses still running (fixtures of wider scope)


def target() -> Path:
    return Path(os.environ.get("RANCH_TEST_LOGS") or REPO / "test-logs")


def watch(folder: str | os.PathLike[str]) -> None:
    """Note a folder whose files are this test's (or this fixture's) daemon logs."""
    path = Path(folder).resolve()
    _this_test.append(path)
    _open[path] = _open.get(path, 0) + 1


def unwatch(folder: str | os.PathLike[str]) -> None:
    """The harness stopped; its folder is still kept for the test that was running."""
    path = Path(folder).resolve()
    left = _open.get(path, 0) - 1
    if left > 0:
        _open[path] = left
    else:
        _open.pop(path, None)


def begin_test() -> None:
    _this_test.clear()


def _safe_name(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_")[:180]


def keep(nodeid: str, extra: list[Path]) -> Path | None:
    """Copy the logs of every folder the failed test touched; returns where, None if none."""
    folders = list(dict.fromkeys([*extra, *_this_test, *_open]))
    dest = target() / _safe_name(nodeid)
    copied = 0
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if copied >= _MAX_FILES:
                break
            try:
                if not path.is_file() or path.is_symlink() or not _KEEP.fullmatch(path.name):
                    continue
                rel = Path(_safe_name(str(folder))) / path.relative_to(folder)
                out = dest / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                size = path.stat().st_size
                if size > _MAX_FILE:
                    with open(path, "rb") as src:
                        src.seek(size - _MAX_FILE)
                        out.write_bytes(src.read())
                else:
                    shutil.copyfile(path, out)
                copied += 1
            except OSError:
                continue  # a file removed while we looked, or a socket: nothing to keep
    return dest if copied else None
