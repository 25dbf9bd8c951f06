"""End states against real Slurm 22.05: exit 0, exit 3, killed by SIGKILL and SIGTERM, over its
time limit, cancelled pending and running, requeued; each (but the time-out) with and without a
time limit. Compared: scontrol's JobState, Reason, ExitCode and Restarts, and squeue's state
letter while the job pends or runs and once it has ended."""

from __future__ import annotations

import pytest

from tests.conformance.compare import explain, param, record_value
from tests.conformance.runner import Results
from tests.conformance.scenarios import ALL, END_STATES

FIELDS = ("JobState", "Reason", "ExitCode", "Restarts")


def test_every_scenario_ran_and_ended(results: Results) -> None:
    """The comparisons below mean something only if both systems took and ended every job."""
    problems = [f"{o.system} {o.scenario.name}: job {o.job_id} submit={o.submit!r} "
                f"ended={o.ended}"
                for outcomes in (results.slurm, results.ranch) for o in outcomes.values()
                if not o.job_id or not o.ended or not o.fields]
    assert not problems, "\n".join([*problems, *results.log])


@pytest.mark.parametrize(("scenario", "field"),
                         [param(s.name, f) for s in ALL for f in FIELDS])
def test_end_state(results: Results, scenario: str, field: str) -> None:
    slurm, ranch = results.pair(scenario)
    want = record_value(slurm, field, results.workdirs["slurm"])
    got = record_value(ranch, field, results.workdirs["ranch"])
    assert got == want, f"{scenario}: {field}: Slurm {want!r}, Ranch {got!r}\n" + explain(
        slurm, ranch)


WATCHED = [s for s in END_STATES if s.action or s.watch]


@pytest.mark.parametrize(("scenario", "field"),
                         [param(s.name, "squeue before") for s in WATCHED]
                         + [param(s.name, "squeue at end") for s in ALL])
def test_squeue_letter(results: Results, scenario: str, field: str) -> None:
    """`squeue -o "%t %r"` when the runner acted (PD and the hold, or R once the script ran);
    `squeue -t all -o %t` once the job ended."""
    slurm, ranch = results.pair(scenario)
    if field == "squeue before":
        want, got = slurm.before, ranch.before
    else:
        want, got = slurm.end_letter, ranch.end_letter
    assert got == want, f"{scenario}: {field}: Slurm {want!r}, Ranch {got!r}\n" + explain(
        slurm, ranch)
