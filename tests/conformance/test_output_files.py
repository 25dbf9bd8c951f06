"""The files a job leaves in its directory: names from sbatch's -o/-e patterns (%j %4j %x %u %N
%A %a %J %n %t %s %%, a backslash that turns them off, unknown letters kept), and what is in
them, including what Slurm itself writes there when it cancels, times out or requeues a job."""

from __future__ import annotations

import pytest

from tests.conformance.compare import files_of, param
from tests.conformance.runner import Results
from tests.conformance.scenarios import END_STATES, ENVIRONMENT, OUTPUT, STARTED

SCENARIOS = [s.name for s in (*END_STATES, *OUTPUT)]
assert not set(SCENARIOS) & {s.name for s in ENVIRONMENT}  # env dumps differ by design


@pytest.mark.parametrize(("scenario", "field"), [param(s, "files") for s in SCENARIOS])
def test_files(results: Results, scenario: str, field: str) -> None:
    slurm, ranch = results.pair(scenario)
    got = files_of(ranch)
    if slurm.scenario.action == "requeue":  # Ranch appends each run (README: deliberate)
        got = {name: text.split(f"{STARTED}\n")[-1] for name, text in got.items()}
    assert got == files_of(slurm, results.hostname)
