"""`scontrol show job -o` as a whole: every key Slurm 22.05 prints, in its order, with the same
values (ids, paths, times and the node a job landed on normalised) for a job that ran, one
cancelled before it ran, a two-node job with memory, a --wrap job and a requeued one."""

from __future__ import annotations

import pytest

from tests.conformance.compare import param, record_value
from tests.conformance.runner import Results

# The keys `scontrol show job -o` prints for a batch job without the optional ones (Slurm 22.05,
# src/api/job_info.c); BatchHost is printed only once the job has one.
KEYS = ("JobId JobName UserId GroupId MCS_label Priority Nice Account QOS JobState Reason "
        "Dependency Requeue Restarts BatchFlag Reboot ExitCode RunTime TimeLimit TimeMin "
        "SubmitTime EligibleTime AccrueTime StartTime EndTime Deadline SuspendTime "
        "SecsPreSuspend LastSchedEval Scheduler Partition AllocNode:Sid ReqNodeList "
        "ExcNodeList NodeList BatchHost NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T TRES "
        "Socks/Node NtasksPerN:B:S:C CoreSpec MinCPUsNode MinMemoryNode MinTmpDiskNode "
        "Features DelayBoot OverSubscribe Contiguous Licenses Network Command WorkDir StdErr "
        "StdIn StdOut Power").split()
# Compared elsewhere (test_end_states.py) or not comparable: the job id is each system's own,
# AllocNode:Sid is the submit host as the controller resolved it and the submitter's session.
NOT_COMPARED = frozenset({"JobId", "JobState", "Reason", "ExitCode", "Restarts",
                          "AllocNode:Sid"})
SCENARIOS = ("exit 3 -t 1", "cancel pending", "env -J -N 2 -n 2 --mem", "wrap", "requeue",
             "output patterns")


@pytest.mark.parametrize("scenario", ["exit 0", "cancel pending"])
def test_keys_in_slurms_order(results: Results, scenario: str) -> None:
    slurm, ranch = results.pair(scenario)
    assert list(ranch.fields) == list(slurm.fields)


@pytest.mark.parametrize(("scenario", "field"),
                         [param(s, k) for s in SCENARIOS for k in KEYS if k not in NOT_COMPARED])
def test_show_job_value(results: Results, scenario: str, field: str) -> None:
    slurm, ranch = results.pair(scenario)
    want = record_value(slurm, field, results.workdirs["slurm"])
    got = record_value(ranch, field, results.workdirs["ranch"])
    assert got == want, (f"{scenario}: {field}: Slurm {slurm.fields.get(field)!r}, "
                         f"Ranch {ranch.fields.get(field)!r}")
