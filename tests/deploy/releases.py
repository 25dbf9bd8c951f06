"""The releases recorded in RELEASES and the version the tree carries (ranch/__init__.py)."""

from __future__ import annotations

import ast
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def current() -> str:
    return version_in(REPO / "ranch" / "__init__.py", (REPO / "pyproject.toml").read_text())


def version_in(init: Path | str, pyproject: str) -> str:
    """The version a tree says: ranch/__init__.py's __version__ (pyproject.toml reads it there),
    or, in a release from before that (0.1.0), pyproject.toml's own `version`."""
    project = tomllib.loads(pyproject)["project"]
    if "version" in project:
        return project["version"]
    text = init.read_text() if isinstance(init, Path) else init
    return ast.literal_eval(text.split("\n__version__ = ", 1)[1].split("\n", 1)[0])


def recorded() -> list[tuple[str, str]]:
    """(version, commit) of every earlier release, newest first."""
    out = []
    for line in (REPO / "RELEASES").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            version, commit = line.split()
            out.append((version, commit))
    return out


def previous() -> tuple[str, str]:
    return recorded()[0]


def commit_present(commit: str) -> bool:
    """The clone holds `commit` (a shallow one may not: then the upgrade test skips)."""
    return subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO,
                          capture_output=True).returncode == 0


def as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))
