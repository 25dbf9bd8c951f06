"""The releases recorded in RELEASES and the version the tree carries (pyproject.toml)."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def current() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


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
