"""Every program's --help hides what it should hide (no `==SUPPRESS==` shown), and the version is
written once, in ranch/__init__.py: the package metadata, every program and every place that
reports a version (rctld's ping, rnoded's registration, the JSON documents) carry that one."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

import ranch
from ranch.cli.slurm_names import RANCH_VERSION
from ranch.ctld.compose.controller import VERSION as RCTLD_VERSION
from ranch.ctld.web.app import API_VERSION
from ranch.noded.registration import RNODED_VERSION

REPO = Path(__file__).resolve().parents[2]
# Every program an install puts on PATH, as pyproject.toml lists them.
_PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROGRAMS = sorted([*_PROJECT["project"]["scripts"],
                   *(Path(f).name for f in _PROJECT["tool"]["setuptools"]["script-files"])])


def _program(name: str) -> list[str]:
    """How to run an installed program with this interpreter (its launcher or entry point)."""
    launcher = REPO / "bin" / name
    if launcher.exists():
        return [sys.executable, str(launcher)]
    module, _, func = _PROJECT["project"]["scripts"][name].partition(":")
    return [sys.executable, "-c", f"import sys; from {module} import {func}; sys.exit({func}())"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_help_shows_no_suppress_marker(name: str) -> None:
    done = subprocess.run([*_program(name), "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert "SUPPRESS" not in done.stdout + done.stderr, name
    if name == "racctmgr":  # as sacctmgr without slurmdbd: one line of refusal, for --help too
        assert done.returncode == 1 and "accounting_storage/slurmdbd" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert done.stdout.lower().startswith("usage:"), done.stdout[:200]


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_program_says_the_one_version(name: str) -> None:
    done = subprocess.run([*_program(name), "--version"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.match(rf"ranch {re.escape(ranch.__version__)}\b", done.stdout), done.stdout


def test_the_version_is_written_once() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", ranch.__version__)
    # pyproject.toml reads it from ranch/__init__.py: the installed metadata is that one.
    assert "version" not in _PROJECT["project"] and "version" in _PROJECT["project"]["dynamic"]
    assert _PROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ranch.__version__"}
    assert version("ranch") == ranch.__version__
    assert RCTLD_VERSION == RNODED_VERSION == RANCH_VERSION == API_VERSION == ranch.__version__
    # ... and no other file of the package writes a release number of its own.
    literal = re.compile(r"""\b(?!SLURM_)\w*(?:VERSION|version)\w*\s*=\s*["']\d+\.\d+\.\d+["']""")
    written = [f"{p.relative_to(REPO)}: {m.group()}" for p in (REPO / "ranch").rglob("*.py")
               for m in literal.finditer(p.read_text())]
    assert written == ['ranch/__init__.py: __version__ = "0.2.0"'.replace(
        "0.2.0", ranch.__version__)], written


def test_rcontrol_dash_h_hides_its_hidden_options() -> None:
    """`rcontrol -h`, as the newcomer typed it (8 options showed ==SUPPRESS== there)."""
    done = subprocess.run([*_program("rcontrol"), "-h"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("usage: rcontrol"), done.stderr
    assert "SUPPRESS" not in done.stdout and "--details" not in done.stdout
