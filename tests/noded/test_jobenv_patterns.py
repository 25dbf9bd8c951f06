"""The -o/-e/-i name patterns of a batch job, expanded as slurmstepd 22.05 expands them for the
batch script (src/slurmd/common/fname.c), the append rule and the --signal moment."""

from __future__ import annotations

import pytest

from ranch.noded.jobenv import append_output, expand_pattern, input_path, job_environment
from ranch.noded.jobsignal import due_in
from ranch.protocol.messages import JobSpec

JOB = JobSpec(job_id=42, name="dask-worker", user="ann", uid=1000, gid=1000, script="",
              workdir="/w", stdout="", nodelist="n[1-2]")
TASK = JobSpec(job_id=45, name="t", user="ann", uid=1000, gid=1000, script="", workdir="/w",
               stdout="", array_job_id=43, array_task_id=2)


@pytest.mark.parametrize(("pattern", "node", "want"), [
    ("dask-worker-%J.err", "n1", "dask-worker-42.err"),  # %J: no ".batch" for the script
    ("%j-%x-%u-%N.out", "n1", "42-dask-worker-ann-n1.out"),
    ("%A_%a", "n1", "42_4294967294"),  # outside an array: the job id, NO_VAL - 1
    ("%n-%t-%s", "n1", "0-0-batch"),
    ("%5j|%3t|%12j", "n1", "00042|000|0000000042"),  # widths, at most 10
    ("%%j is %j, 100%%", "n1", "%j is 42, 100%"),
    ("%q %5q %", "n1", "%q %5q %"),  # unknown letters stay as written
    ("lit\\%j\\\\x", "n1", "lit%jx"),  # a backslash: literal, every backslash dropped
])
def test_batch_patterns(pattern: str, node: str, want: str) -> None:
    assert expand_pattern(pattern, JOB, node) == want


def test_array_patterns() -> None:
    assert expand_pattern("%A_%a-%4a-%j", TASK, "n1") == "43_2-0002-45"


def test_input_and_append() -> None:
    assert input_path(JOB, "n1") == ""
    spec = JobSpec(**{**_fields(JOB), "input": "in-%j.txt"})
    assert input_path(spec, "n1") == "/w/in-42.txt"
    assert not append_output(JOB)
    assert append_output(JobSpec(**{**_fields(JOB), "open_mode": "append"}))
    assert append_output(JobSpec(**{**_fields(JOB), "restarts": 1}))  # a requeue keeps output
    assert not append_output(JobSpec(**{**_fields(JOB), "restarts": 1,
                                        "open_mode": "truncate"}))


def test_the_script_is_task_zero_and_get_user_env_fills_the_login_basics() -> None:
    env = job_environment(JOB, "n1")
    assert (env["SLURM_PROCID"], env["SLURM_LOCALID"], env["ENVIRONMENT"]) == ("0", "0", "BATCH")
    assert "HOME" not in env
    spec = JobSpec(**{**_fields(JOB), "uid": 0, "env": (("SLURM_GET_USER_ENV", "1"),)})
    env = job_environment(spec, "n1")
    assert env["USER"] == "root" and env["HOME"]


def test_signal_moment() -> None:
    spec = JobSpec(**{**_fields(JOB), "time_limit": 100.0, "warn_signal": 12, "warn_time": 30})
    assert due_in(spec, started_at=1000.0, now=1010.0) == 60.0
    assert due_in(spec, started_at=1000.0, now=1090.0) == 0.0  # late: at once
    assert due_in(JobSpec(**{**_fields(JOB), "warn_signal": 12}), 0.0, 0.0) is None  # no limit


def _fields(spec: JobSpec) -> dict:
    import attrs

    return attrs.asdict(spec, recurse=False)


def _step(**kw):
    from ranch.protocol.stepmessages import StepSpec

    base = dict(job_id=45, restarts=0, step_id=0, name="python", user="ann", uid=1000,
                gid=1000, argv=("python",), cwd="/w", env=(), nodelist="n1", node_index=0,
                tasks=(0,), ntasks=1, tasks_per_node="1", cpus_per_task=1, io_host="h",
                io_port=1, key="k")
    return StepSpec(**{**base, **kw})


def test_step_patterns_in_an_array_task() -> None:
    """srun -o inside an array task: %A is the array's master id, %a the task's index (what
    submitit's map_array names its files by); outside an array %A is the job, %a NO_VAL-1."""
    from ranch.noded.taskenv import expand

    step = _step()
    pattern = "log_%A_%a/%A_%a_%t.out"
    assert expand(pattern, step, "n1", 0, "t", 43, 2) == "/w/log_43_2/43_2_0.out"
    assert expand(pattern, step, "n1", 0, "t") == "/w/log_45_4294967294/45_4294967294_0.out"
    assert expand("%3a-%j.%s", step, "n1", 0, "t", 43, 2) == "/w/002-45.0"


def test_a_step_file_that_cannot_be_opened_is_said_so() -> None:
    """slurmstepd's words for it, not execve()'s (the program never starts)."""
    from ranch.noded.taskenv import OpenError, exec_error

    try:
        open("/nonexistent-dir/x.out", "ab")
    except OSError as exc:
        err = OpenError("stdout", "/nonexistent-dir/x.out", exc)
    assert exec_error(_step(), err, "n1") == ("slurmstepd-n1: error: Could not open stdout file "
                                              "/nonexistent-dir/x.out: No such file or "
                                              "directory\n")
