"""Every program says the version ranch/__init__.py gives, and RELEASES names the earlier ones."""

from __future__ import annotations

import subprocess

import pytest
from releases import REPO, as_tuple, commit_present, current, recorded, version_in

from ranch.cli.slurm_names import RANCH_VERSION
from ranch.ctld.compose.controller import VERSION as RCTLD_VERSION
from ranch.noded.registration import RNODED_VERSION


def test_the_programs_carry_the_package_version() -> None:
    assert RCTLD_VERSION == RNODED_VERSION == RANCH_VERSION == current()


def test_releases_are_older_and_newest_first() -> None:
    versions = [as_tuple(v) for v, _ in recorded()]
    assert versions, "RELEASES names no earlier release"
    assert versions == sorted(versions, reverse=True)
    assert versions[0] < as_tuple(current())


@pytest.mark.parametrize(("version", "commit"), recorded())
def test_each_release_commit_carries_its_version(version: str, commit: str) -> None:
    if not commit_present(commit):
        pytest.skip(f"release {version} ({commit}) is not in this clone (shallow?)")

    def show(path: str) -> str:  # "" for a file that release had not (0.1.0: no __init__.py)
        return subprocess.run(["git", "show", f"{commit}:{path}"], cwd=REPO,
                              capture_output=True, text=True).stdout

    assert version_in(show("ranch/__init__.py"), show("pyproject.toml")) == version
