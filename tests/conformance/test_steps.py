"""Job steps against srun 22.05: the same srun calls inside the same batch jobs on a private
Slurm and on Ranch (rrun through its `srun` shim), compared: each call's exit code, stdout and
stderr (their lines as a multiset: tasks on two nodes interleave as they like on both), the
files -o/-e patterns name, every SLURM_* name each task sees with its value, which task lands on
which node, which step waits for which, and what srun does with the signals it gets."""

from __future__ import annotations

import re

import pytest

from tests.conformance.compare import ABSENT, TIME
from tests.conformance.runner import Outcome, Results
from tests.conformance.step_scenarios import CASES, ENV_CASES, OUTPUT_CASES, SCENE_FILES, SCENE_JOB

# What a 22.05 task sees: the batch script's names (test_environment.py) and srun's own
NAMES = ("HOSTNAME SLURMD_NODENAME SLURM_CLUSTER_NAME SLURM_CPUS_ON_NODE SLURM_CPUS_PER_TASK "
         "SLURM_DISTRIBUTION SLURM_GTIDS SLURM_JOBID SLURM_JOB_CPUS_PER_NODE "
         "SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0 SLURM_JOB_GID SLURM_JOB_ID SLURM_JOB_NAME "
         "SLURM_JOB_NODELIST SLURM_JOB_NUM_NODES SLURM_JOB_PARTITION SLURM_JOB_UID "
         "SLURM_JOB_USER SLURM_LABELIO SLURM_LAUNCH_NODE_IPADDR SLURM_LOCALID SLURM_NNODES "
         "SLURM_NODEID "
         "SLURM_NODELIST SLURM_NODE_ALIASES SLURM_NPROCS SLURM_NTASKS SLURM_NTASKS_PER_NODE "
         "SLURM_PRIO_PROCESS SLURM_PROCID SLURM_SRUN_COMM_HOST SLURM_SRUN_COMM_PORT "
         "SLURM_STEPID SLURM_STEP_ID SLURM_STEP_LAUNCHER_PORT SLURM_STEP_NODELIST "
         "SLURM_STEP_NUM_NODES SLURM_STEP_NUM_TASKS SLURM_STEP_TASKS_PER_NODE "
         "SLURM_SUBMIT_DIR SLURM_SUBMIT_HOST SLURM_TASKS_PER_NODE SLURM_TASK_PID "
         "SLURM_TOPOLOGY_ADDR SLURM_TOPOLOGY_ADDR_PATTERN SLURM_UMASK").split()
NOT_COMPARED = frozenset({"SLURM_CONF", "SLURM_WORKING_CLUSTER"})  # README: deliberate
NUMBERS = {"SLURM_TASK_PID": "<pid>", "SLURM_SRUN_COMM_PORT": "<port>",
           "SLURM_STEP_LAUNCHER_PORT": "<port>"}

# Ranch's gaps in its steps: (case or "*", what) -> the finding. Each is an xfail(strict=True);
# the day it is fixed the test passes, fails as XPASS, and its line here goes.
GAPS: dict[tuple[str, str], str] = {}


def _param(case: str, what: str):
    reason = GAPS.get((case, what)) or GAPS.get(("*", what))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, what, marks=marks, id=f"{case}|{what}")


def _job(results: Results, case: str) -> tuple[Outcome, Outcome]:
    job = CASES[case][0] if case in CASES else SCENE_JOB
    return results.pair(job.name)


def ids(text: str, job_id: int) -> str:
    """The job id where srun's messages and the cases' file names put it, as <jobid>. (Only
    there: the ids are small numbers, and task ids and counts are compared as they are.)"""
    after = "|".join(f"(?<={w})" for w in ("job ", "Job ", "JOB ", "StepId=", "STEP ", "_j",
                                           "_J", "one_"))
    return re.sub(rf"(?:{after}){job_id}(?![0-9])", "<jobid>", text)


def _text(o: Outcome, name: str, results: Results) -> str | None:
    text = o.files.get(name)
    if text is None:
        return None
    return TIME.sub("<time>", ids(text, o.job_id).replace(results.workdirs[o.system],
                                                          "<workdir>"))


# Lines a case's srun may print or not on Slurm: the cases run one after another, and slurmctld
# may not have freed the last step's CPUs yet when the next asks (it then waits a moment, or
# takes another node)
RACY = ("step creation temporarily disabled", "Step created for job")
# srun's SIGTERM/SIGHUP: it stops listening within KillWait, so which nodes' last lines it
# still prints varies; compared as the set of line kinds, node names and task ids as <n>
KINDS = re.compile(r"\b(c\d+|task \d+)\b")


def _lines(o: Outcome, name: str, results: Results) -> list[str] | str:
    text = _text(o, name, results)
    if text is None:
        return ABSENT
    lines = text.splitlines()
    case = name.rsplit(".", 1)[0]
    if case in CASES or case.startswith(("sig", "int")):
        lines = [line for line in lines if not any(r in line for r in RACY)]
        if case.startswith("lay_") and len(set(re.findall(r"c\d+", text))) == 1:
            # a one-node step: for the same reason, on whichever node slurmctld freed first
            lines = [re.sub(r"c\d+", "<node>", line) for line in lines]
    if case == "int2":
        # after its Ctrl-C srun either hears the tasks end (their "Interrupt" lines) or gives up
        # waiting ("Job step aborted: ..."): seen both ways on Slurm; the rest is compared
        lines = [line for line in lines if "Job step aborted" not in line
                 and not line.endswith(": Interrupt")]
    if case in ("sigTERM", "sigHUP", "sigQUIT", "int2"):
        return sorted({KINDS.sub(lambda m: re.sub(r"\d+", "<n>", m.group(0)), line)
                       for line in lines})
    return sorted(lines)


# srun 22.05 may take its signal after the tasks ran and wrote through it but before it has
# every node's launch reply (seen under load, after the scenario's wait for both tasks' ready
# lines and files; nothing srun does shows when the replies are in): it then adds this line,
# and may forward no kill to slurmstepd, so that slurmstepd's CANCELLED line is not there.
# Both go from both sides' lines in that case; the rest is compared.
EARLY = "aborted before step completely launched"
CANCELLED_LINE = re.compile(r"^slurmstepd-c<n>: error: \*\*\* STEP .* CANCELLED AT <time> \*\*\*$")


# A USR1 that srun passes on can miss a task of Slurm's under load: srun forwards it to each
# node and drops, unreported, slurmstepd's answers that the step is not running there (yet) or
# the process is gone (step_launch.c's fwd_signal ignores ESLURMD_JOB_NOTRUNNING and ESRCH).
# (the likely path: Slurm's logs of those runs were not kept). In 2 of 3 runs of the suite with a
# core hogged, one of the two tasks never printed "got USR1" and slept its 30 s, task 0 once and
# task 1 once, and a second USR1 10 s later did not reach it either; quiet runs and Ranch deliver
# both. Then the task that missed it is compared as Slurm delivers it on a quiet machine: its
# "got USR1" line and its exit 7.
LOST_USR1 = "got USR1"
USR1_EXIT = re.compile(r"^srun: error: c\d+: task (\d+): Exited with exit code 7$")


def _usr1_lost(slurm: list[str], ranch: list[str], suffix: str, missed: int) -> list[str]:
    """Slurm's lines with the `missed` tasks' lines Ranch has for them (Ranch's must be those
    lines alone: a "got USR1" each on stdout, an exit 7 each on stderr)."""
    extra = list(ranch)
    for line in slurm:
        if line in extra:
            extra.remove(line)
    fits = (extra == [LOST_USR1] * missed if suffix == "out"
            else len(extra) == missed and all(USR1_EXIT.match(x) for x in extra))
    return sorted(slurm + extra) if fits else slurm


def _both(results: Results, case: str, suffix: str) -> tuple[object, object]:
    slurm, ranch = _job(results, case)
    if suffix == "rc":
        return (_text(slurm, f"{case}.rc", results) or ABSENT).strip(), \
            (_text(ranch, f"{case}.rc", results) or ABSENT).strip()
    want = _lines(slurm, f"{case}.{suffix}", results)
    got = _lines(ranch, f"{case}.{suffix}", results)
    if case.startswith("sig") and isinstance(want, list) and any(EARLY in x for x in want):
        want, got = ([x for x in lines if EARLY not in x and not CANCELLED_LINE.match(x)]
                     if isinstance(lines, list) else lines for lines in (want, got))
    out = _lines(slurm, f"{case}.out", results)
    if case == "sigUSR1" and isinstance(want, list) and isinstance(got, list) \
            and isinstance(out, list) and out.count(LOST_USR1) < out.count("ready"):
        want = _usr1_lost(want, got, suffix, out.count("ready") - out.count(LOST_USR1))
    return want, got


def _explain(results: Results, case: str) -> str:
    slurm, ranch = _job(results, case)
    return "\n".join(f"{o.system}: job {o.job_id} submit={o.submit!r} ended={o.ended} "
                     f"state={o.fields.get('JobState')} slurm-N.out={o.out[-500:]!r}"
                     for o in (slurm, ranch)) + "\n" + "\n".join(results.log[-5:])


@pytest.mark.parametrize(("case", "what"), [_param(c, w) for c in [*OUTPUT_CASES, *SCENE_FILES]
                                            for w in ("rc", "out", "err")])
def test_step_output(step_results: Results, case: str, what: str) -> None:
    """srun's exit code, stdout and stderr lines for each call."""
    want, got = _both(step_results, case, what)
    assert got == want, f"{case}.{what}: Slurm {want!r}, Ranch {got!r}\n" + _explain(
        step_results, case)


def _named_files(o: Outcome, results: Results) -> dict[str, list[str]]:
    """The files -o/-e patterns made (what the case list does not name itself)."""
    out = {}
    for name in o.files:
        if name.startswith(("o_", "e_", "one_", "trunc_")):
            # %N: Slurm writes its slurmd host's name (README: deliberate), Ranch the node's
            key = re.sub(rf"N({re.escape(results.hostname)}|c\d+)", "N<node>", ids(name, o.job_id))
            out[key] = _lines(o, name, results)
    return out


def test_output_patterns(step_results: Results) -> None:
    slurm, ranch = step_results.pair("steps io")
    want, got = _named_files(slurm, step_results), _named_files(ranch, step_results)
    assert got == want


def _env(o: Outcome, case: str) -> list[dict[str, str]]:
    """Each task's environment, by task id."""
    prefix = f"{case}.env."
    envs = []
    for name in sorted((n for n in o.files if n.startswith(prefix)),
                       key=lambda n: int(n[len(prefix) + 1:])):
        env = {}
        for item in o.files[name].split("\0"):
            key, sep, value = item.partition("=")
            if sep and key:
                env[key] = value
        envs.append(env)
    return envs


def _value(o: Outcome, env: dict[str, str], name: str, workdir: str) -> str:
    value = env.get(name)
    if value is None:
        return ABSENT
    if name in NUMBERS and value.isdigit():
        return NUMBERS[name]
    if name in ("SLURM_JOB_ID", "SLURM_JOBID") and value == str(o.job_id):
        return "<jobid>"
    return value.replace(workdir, "<workdir>")


@pytest.mark.parametrize(("case", "what"), [_param(c, n) for c in ENV_CASES for n in NAMES])
def test_task_env(step_results: Results, case: str, what: str) -> None:
    """One SLURM_* name in every task of the step, task by task."""
    slurm, ranch = _job(step_results, case)
    s_envs, r_envs = _env(slurm, case), _env(ranch, case)
    assert s_envs, f"{case}: Slurm's tasks left no environment\n" + _explain(step_results, case)
    want = [_value(slurm, e, what, step_results.workdirs["slurm"]) for e in s_envs]
    got = [_value(ranch, e, what, step_results.workdirs["ranch"]) for e in r_envs]
    assert got == want, f"{case}: ${what} by task: Slurm {want}, Ranch {got}"


@pytest.mark.parametrize("case", ENV_CASES)
def test_no_other_slurm_names(step_results: Results, case: str) -> None:
    seen = {n for o in _job(step_results, case) for e in _env(o, case) for n in e
            if n.startswith("SLURM")}
    assert seen - set(NAMES) - NOT_COMPARED == set()


def test_steps_wall_time(step_results: Results) -> None:
    """Both systems ran every step scenario, within the time the suite allows itself."""
    assert all(o.ended for d in (step_results.slurm, step_results.ranch) for o in d.values()), \
        "\n".join(step_results.log)
    assert step_results.seconds < 120, f"took {step_results.seconds:.0f} s"
