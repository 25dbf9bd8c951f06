"""The conformance suite's one expensive fixture: a private real Slurm and a Ranch test cluster of
the same shape, every scenario run on both at once, the results kept and both clusters gone
before the first comparison runs.

Skips (saying why) where Slurm 22.05 and munge are not installed or cannot start here; with
RANCH_REQUIRE_SLURM=1 (set by .ci/run once it installed them) that is a failure instead.
"""

from __future__ import annotations

import os
import socket
import time

import pytest

from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.runner import Results, Runner
from tests.conformance.scenarios import ALL
from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_missing
from tests.conformance.step_scenarios import SCENARIOS as STEP_SCENARIOS


def _unavailable(reason: str) -> None:
    if os.environ.get("RANCH_REQUIRE_SLURM") == "1":
        pytest.fail(f"RANCH_REQUIRE_SLURM=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def start_slurm(shape=SHAPE, **kwargs) -> SlurmCluster:
    """A started private Slurm of `shape` (SlurmCluster's keywords), or the suite's skip (or
    failure) saying why not."""
    reason = slurm_missing()
    if reason:
        _unavailable(reason)
    for attempt in range(3):  # a free port picked for it may be taken before it binds it
        slurm = SlurmCluster(shape, **kwargs)
        try:
            slurm.start()
            return slurm
        except SlurmUnavailable as exc:
            slurm.stop()
            if attempt == 2 or "Address already in use" not in str(exc):
                _unavailable(f"a private Slurm could not start: {exc}")
    raise AssertionError("unreachable")


def _run_both(scenarios, raw_names: bool = False) -> Results:
    """Every scenario on a fresh private Slurm and a fresh Ranch of SHAPE, at once."""
    began = time.monotonic()
    slurm = start_slurm()
    try:
        with RanchCluster(SHAPE) as ranch:
            runner = Runner([slurm, ranch], scenarios, raw_names=raw_names)
            outcomes = runner.run()
            workdirs = {"slurm": str(slurm.workdir), "ranch": str(ranch.workdir)}
            if not all(o.ended for d in outcomes.values() for o in d.values()):
                runner.log.append("--- Slurm logs ---\n" + slurm.log_tail())
                runner.log.append("--- Ranch logs ---\n" + ranch.log_tail())
    finally:
        slurm.stop()
    return Results(outcomes["slurm"], outcomes["ranch"], workdirs, socket.gethostname(),
                   tuple(runner.log), time.monotonic() - began)


@pytest.fixture(scope="session")
def results() -> Results:
    return _run_both(ALL)


@pytest.fixture(scope="session")
def step_results() -> Results:
    """The job steps' scenarios (step_scenarios.py): srun's and rrun's, on their own clusters
    so that no other scenario's job holds CPUs the steps' layouts count on."""
    return _run_both(STEP_SCENARIOS, raw_names=True)
