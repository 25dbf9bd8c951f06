"""Slurm's side of a scenario that needs accounting: a private Slurm with slurmdbd started, the
scenario run on it, Slurm stopped; skipped where slurmdbd/MariaDB are missing (a failure where
RANCH_REQUIRE_SLURMDBD=1 says they must be there)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import pytest

from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import (
    BUILTIN,
    SlurmCluster,
    SlurmUnavailable,
    slurm_missing,
)
from tests.conformance.slurmdbd import accounting_missing

T = TypeVar("T")


def on_slurm_with_slurmdbd(extra_conf: str, scenario: Callable[[SlurmCluster], T],
                           timeout: float | None = None, scheduler: str = BUILTIN) -> T:
    reason = slurm_missing() or accounting_missing()
    if reason:
        if os.environ.get("RANCH_REQUIRE_SLURMDBD") == "1":
            pytest.fail(f"RANCH_REQUIRE_SLURMDBD=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    slurm = SlurmCluster(SHAPE, accounting=True, extra_conf=extra_conf, scheduler=scheduler)
    try:
        try:
            slurm.start() if timeout is None else slurm.start(timeout=timeout)
        except SlurmUnavailable as exc:
            pytest.fail(f"a private Slurm with slurmdbd could not start: {exc}", pytrace=False)
        return scenario(slurm)
    finally:
        slurm.stop()
