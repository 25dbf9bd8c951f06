"""sacct against real Slurm 22.05: `sacct --completion` (Slurm's jobcomp/filetxt record, the
only sacct a Slurm without slurmdbd answers) beside racct for the end states (completed, exit
3, killed by a signal, cancelled pending and running, timeout, requeued). Compared: JobID,
JobName, State, ExitCode, NodeList, Start, End, Elapsed in `-P` form, and the fixed-width
table (`-o JobID,JobName,State,ExitCode,Elapsed`: widths, justification, `+` cuts, header
dashes). What jobcomp cannot give (steps, MaxRSS, Account, AllocCPUS, ReqMem, the window
rules of a real accounting database) is checked against Ranch alone in
tests/integration/test_racct_e2e.py; tests/conformance/README.md says why."""

from __future__ import annotations

import re

import pytest

from tests.conformance.compare import ELAPSED, TIME, explain, nodes_out
from tests.conformance.runner import ACCT_FIELDS, Outcome, Results
from tests.conformance.scenarios import END_STATES

GAPS: dict[tuple[str, str], str] = {}


def _param(scenario: str, field: str):
    reason = GAPS.get((scenario, field)) or GAPS.get(("*", field))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(scenario, field, marks=marks, id=f"{scenario}|{field}")


def value(o: Outcome, field: str) -> str:
    v = o.acct.get(field)
    if v is None:
        return "<absent>"
    if field == "JobID":
        return v.replace(str(o.job_id), "<jobid>", 1)
    if field == "NodeList":
        if v in ("(null)", "None assigned"):  # a job that never ran: jobcomp writes (null)
            return "None assigned"  # where sacct over slurmdbd (and racct) says this
        return nodes_out(v, o)
    if field == "Elapsed" and ELAPSED.match(v):
        return "<elapsed>"
    return TIME.sub("<time>", v)


@pytest.mark.parametrize(("scenario", "field"),
                         [_param(s.name, f) for s in END_STATES for f in ACCT_FIELDS])
def test_sacct_field(results: Results, scenario: str, field: str) -> None:
    slurm, ranch = results.pair(scenario)
    assert slurm.acct, f"{scenario}: Slurm's sacct -c has no line for it\n" + explain(
        slurm, ranch)
    want, got = value(slurm, field), value(ranch, field)
    assert got == want, f"{scenario}: sacct {field}: Slurm {want!r}, Ranch {got!r}\n" \
        f"Slurm: {slurm.acct}\nRanch: {ranch.acct}"


def _table(o: Outcome) -> list[str]:
    """The header, the dashes and the job's last line: jobcomp writes a line for every run of
    a requeued job (the one requeued as PENDING), sacct over slurmdbd shows the latest run
    unless -D, and so does racct."""
    out = []
    for line in o.acct_table[:2] + o.acct_table[-1:]:
        line = line.replace(f"{o.job_id:<12}", f"{'<jobid>':<12}", 1)
        out.append(re.sub(r"\d\d:\d\d:\d\d", "hh:mm:ss", line))
    return out


@pytest.mark.parametrize("scenario", [_param(s.name, "table").values[0] for s in END_STATES])
def test_sacct_table(results: Results, scenario: str) -> None:
    slurm, ranch = results.pair(scenario)
    assert _table(ranch) == _table(slurm), "\n".join(
        ["Slurm:", *slurm.acct_table, "Ranch:", *ranch.acct_table])
