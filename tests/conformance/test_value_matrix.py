"""Every value Slurm's commands accept, accepted the same way: the differential matrix.

Each option of the Slurm 22.05 man pages of sbatch srun salloc squeue sinfo scancel scontrol
sacct sshare sacctmgr (read from the installed pages: man_options.py) crossed with its value
forms (value_cases.py, derived from Slurm's parsers' rules) runs on a private Slurm and on Ranch
(its commands under Slurm's names, cli/slurm_names.py, many cases to a Python process:
value_worker.py). Compared (value_matrix.py): the exit status, the meaning of the first error
line (accepted / refused-usage / refused-value / refused-controller), `scontrol show job` of the
held job an sbatch case made, the output of a format token. A disagreement is either listed in
value_differences.py with its reason or a failure; the report says how many cases ran and how
many of each list entry's cases it met.

RANCH_MATRIX_COMMANDS=squeue,sinfo runs those commands' part only (a few seconds; entries of the
other commands are then not held to meeting a case); RANCH_MATRIX_DUMP=FILE writes every
disagreement with the number of the entry that lists it (`-` for none), to work from.
"""

from __future__ import annotations

import collections
import os
import re
import time

import pytest

from tests.conformance.conftest import start_slurm
from tests.conformance.man_options import man_path, read
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE
from tests.conformance.value_cases import COMMANDS, EXCLUDED, Case, all_cases, cases_for, selected
from tests.conformance.value_differences import LISTED, Listed
from tests.conformance.value_matrix import Disagreement, Side, compare, run_matrix

GOAL = 2000
# RANCH_MATRIX_COMMANDS=sacct,scancel runs only those commands' cases (value_cases.selected)
SELECTED = selected()


def _selected(entry: Listed) -> bool:
    """Whether every command the entry names is among those run (else its cases may be absent)."""
    return all(c in SELECTED for c in COMMANDS if re.fullmatch(entry.command, c))


@pytest.fixture(scope="module")
def matrix():
    missing = [c for c in COMMANDS if man_path(c) is None]
    if missing:  # the cases come from the man pages (an image may leave docs out: a skip)
        pytest.skip(f"no man page for {', '.join(missing)} (Debian's slurm-wlm installs them "
                     "under /usr/share/man/man1)")
    cases = all_cases()
    began = time.monotonic()
    slurm = start_slurm()
    try:
        with RanchCluster(SHAPE) as ranch:
            slurm_side, ranch_side = run_matrix(slurm, ranch, cases)
    finally:
        slurm.stop()
    return cases, compare(cases, slurm_side, ranch_side), time.monotonic() - began


def _covers(entry: Listed, d: Disagreement) -> bool:
    return (entry.holds()
            and re.fullmatch(entry.command, d.case.command) is not None
            and re.fullmatch(entry.option, d.case.option) is not None
            and re.fullmatch(entry.what, d.what) is not None
            and re.fullmatch(entry.form, d.case.form) is not None
            and re.fullmatch(entry.slurm, d.slurm, re.S) is not None
            and re.fullmatch(entry.ranch, d.ranch, re.S) is not None)


def test_every_case_agrees_or_is_listed(matrix) -> None:
    cases, disagreements, took = matrix
    met: collections.Counter[int] = collections.Counter()
    unlisted = []
    for d in disagreements:
        hit = next((i for i, e in enumerate(LISTED) if _covers(e, d)), None)
        if hit is None:
            unlisted.append(d)
        else:
            met[hit] += 1
    gaps = sum(n for i, n in met.items() if LISTED[i].gap)
    print(f"\nvalue matrix: {len(cases)} cases in {took:.0f} s "
          f"({dict(collections.Counter(c.command for c in cases))}); "
          f"{len(cases) - len({d.case for d in disagreements})} agree; "
          f"{len(disagreements)} disagreements: {len(disagreements) - gaps - len(unlisted)} "
          f"listed as deliberate, {gaps} listed as open gaps, {len(unlisted)} unlisted")
    if SELECTED != COMMANDS:  # fixing a command: its open gaps, case by case
        for d in disagreements:
            hit = next((i for i, e in enumerate(LISTED) if _covers(e, d)), None)
            if hit is not None and LISTED[hit].gap:
                print(f"  GAP {d}")
    for i, entry in enumerate(LISTED):
        print(f"  {met[i]:5d} {'GAP ' if entry.gap else ''}{entry.command} / {entry.option[:40]}"
              f" / {entry.what}{'' if entry.holds() else ' (not on this machine)'}")
    dump = os.environ.get("RANCH_MATRIX_DUMP")
    if dump:  # every disagreement and the entry that lists it, to work from
        with open(dump, "w") as f:
            for d in disagreements:
                hit = next((i for i, e in enumerate(LISTED) if _covers(e, d)), None)
                f.write(f"{'-' if hit is None else hit}\t{d}\n")
    assert len(cases) >= GOAL or SELECTED != COMMANDS
    # with RANCH_MATRIX_COMMANDS, only the entries whose every command ran
    stale = [e for i, e in enumerate(LISTED)
             if not met[i] and not e.race and not e.machine and e.holds() and _selected(e)]
    assert not unlisted, "unlisted disagreements:\n" + "\n".join(map(str, unlisted[:60]))
    assert not stale, "listed differences no case meets any more (fixed? take them out):\n" + (
        "\n".join(f"{e.command} {e.option} {e.what}" for e in stale))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_man_page_option_has_cases(command: str) -> None:
    """Generated from the installed man page at run time: an option the page lists and no case
    tries would be a hole in the matrix (EXCLUDED says why for the few it cannot run)."""
    options = read(command)
    if not options:
        pytest.skip(f"no man page for {command} (Debian's slurm-wlm installs them)")
    tried = {c.option for c in cases_for(command)}
    missing = [o.long or o.short for o in options
               if (o.long or o.short) not in tried and (command, o.long or o.short) not in EXCLUDED]
    assert not missing


def test_a_difference_of_another_machine_covers_nothing() -> None:
    """An entry whose condition is false here lists nothing: the cases it names must agree
    (and its absence is no staleness); where the condition holds it covers as any entry."""
    case = Case("salloc", "get-user-env", "--get-user-env", ("salloc", "--get-user-env"))
    d = Disagreement(case, "class", "refused-value: x", "accepted: y")
    here = Listed("salloc", "get-user-env", "class", "why", when=lambda: True)
    elsewhere = Listed("salloc", "get-user-env", "class", "why", when=lambda: False)
    assert _covers(here, d) and not _covers(elsewhere, d)
    assert here.holds() and not elsewhere.holds()


def test_a_value_equal_to_ranchs_job_id_is_not_taken_for_it() -> None:
    """Ranch's job 100, made by --cpus-per-task=100, is Slurm's job 139 for that case: its
    NumCPUs=100 agrees with Slurm's as written, and only a field that differs by the id (a
    path with %j) is read with the ids mapped. A busy run under TZ=Etc/GMT+10 once saw the
    value rewritten to the id."""
    case = Case("sbatch", "cpus-per-task", "100", ("sbatch", "-H", "--cpus-per-task=100", "job.sh"))
    slurm = Side(results=[(0, "Submitted batch job 139\n", "")], workdir="/tmp/sl", base=1,
                 jobs={1: {"NumCPUs": "1"},
                       139: {"NumCPUs": "100", "StdOut": "/tmp/sl/slurm-139.out"}})
    ranch = Side(results=[(0, "Submitted batch job 100\n", "")], workdir="/tmp/ra", base=1,
                 jobs={1: {"NumCPUs": "1"},
                       100: {"NumCPUs": "100", "StdOut": "/tmp/ra/slurm-100.out"}})
    assert compare([case], slurm, ranch) == []
    ranch.jobs[100]["StdOut"] = "/tmp/ra/slurm-101.out"
    assert [d.what for d in compare([case], slurm, ranch)] == ["field StdOut"]
