"""The node's job runner in-process, with real shims, real scripts and real files."""

from __future__ import annotations

import math
import os
import re
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from ranch.noded import jobstore
from ranch.noded.jobenv import expand_pattern
from ranch.noded.joblaunch import LaunchError
from ranch.noded.jobs import JobRunner
from ranch.protocol.messages import JobEnd, JobSpec
from tests.deadline import scaled

ROOT = os.geteuid() == 0


def spec(workdir: Path, script: str, job_id: int = 7, **kw: object) -> JobSpec:
    """A job of the current user (root jobs are allowed in these runners)."""
    fields: dict = dict(
        job_id=job_id,
        name="test",
        user="alice",
        uid=os.getuid(),
        gid=os.getgid(),
        script="#!/bin/sh\n" + script,
        workdir=str(workdir),
        stdout="slurm-%j.out",
        kill_wait=2.0,
    )
    fields.update(kw)
    return JobSpec(**fields)


async def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    with trio.fail_after(scaled(timeout)):  # stretched as the machine gets busier
        while not cond():
            await trio.sleep(0.01)


async def ended(runner: JobRunner, job_id: int, timeout: float = 10.0) -> JobEnd:
    await wait_for(lambda: any(e.job_id == job_id for e in runner.endings()), timeout)
    return next(e for e in runner.endings() if e.job_id == job_id)


@pytest.fixture
async def runner(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[JobRunner]:
    r = JobRunner(str(tmp_path / "spool"), "n1")
    await nursery.start(r.run)
    yield r


@pytest.fixture
def work(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    return d


async def read_pid(path: Path) -> int:
    """The pid a script writes with `echo $$ > FILE`, once the whole line is there."""
    await wait_for(lambda: path.exists() and path.read_text().endswith("\n"))
    return int(path.read_text())


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2 :].split()[0] == b"Z"
    except OSError:
        return True


async def test_environment_and_output_patterns(runner: JobRunner, work: Path) -> None:
    script = (
        "env | grep -E '^(SLURM|RANCH|CUDA|GPU|MY)' | sort\n"
        "echo oops >&2\n"
        'echo "args=$*" "cwd=$(pwd)"\n'
    )
    job = spec(
        work,
        script,
        42,
        name="build",
        nodelist="n[1-4]",
        num_nodes=4,
        ntasks=8,
        cpus_per_task=2,
        cpus=4,
        gpus=(1, 3),
        partition="debug",
        submit_host="login1",
        env=(("MY_VAR", "x y"), ("CUDA_VISIBLE_DEVICES", "0,1,2,3")),
        argv=("a", "b c"),
        stdout="out-%x-%j-%N-%u-%%.txt",
        stderr="err-%5j.txt",
        array_job_id=40,
        array_task_id=2,
        restarts=0,
    )
    runner.node = "n1"
    await runner.launch(job)
    end = await ended(runner, 42)
    assert (end.state, end.exit_code, end.signal, end.restarts) == ("COMPLETED", 0, 0, 0)
    assert end.ended_at >= end.started_at > 0
    out = (work / "out-build-42-n1-alice-%.txt").read_text()  # n1: the batch host
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line and " " not in line)
    assert env["SLURM_JOB_ID"] == env["RANCH_JOB_ID"] == env["SLURM_JOBID"] == "42"
    assert env["SLURM_JOB_NAME"] == "build"
    assert env["SLURM_JOB_NODELIST"] == env["SLURM_NODELIST"] == "n[1-4]"
    assert env["SLURM_JOB_NUM_NODES"] == env["SLURM_NNODES"] == "4"
    assert env["SLURM_NTASKS"] == "8" and env["SLURM_CPUS_PER_TASK"] == "2"
    assert env["SLURM_CPUS_ON_NODE"] == "4" and env["SLURM_NODEID"] == "0"
    assert env["SLURMD_NODENAME"] == "n1" and env["SLURM_SUBMIT_DIR"] == str(work)
    assert env["SLURM_SUBMIT_HOST"] == "login1" and env["SLURM_JOB_PARTITION"] == "debug"
    assert env["SLURM_JOB_USER"] == "alice" and env["SLURM_JOB_UID"] == str(os.getuid())
    assert "SLURM_RESTART_COUNT" not in env  # Slurm sets it on a requeued run only
    assert env["SLURM_ARRAY_JOB_ID"] == "40" and env["SLURM_ARRAY_TASK_ID"] == "2"
    # the inherited CUDA_VISIBLE_DEVICES is replaced by the job's own GPUs
    assert env["CUDA_VISIBLE_DEVICES"] == env["SLURM_JOB_GPUS"] == "1,3"
    assert env["GPU_DEVICE_ORDINAL"] == "1,3"
    assert "MY_VAR=x y" in out
    assert f"args=a b c cwd={work}" in out
    assert (work / "err-00042.txt").read_text() == "oops\n"


async def test_the_script_runs_on_the_batch_host_only(runner: JobRunner, work: Path) -> None:
    """On the allocation's other nodes the job holds its resources with a placeholder: the
    script never runs there (sbatch runs it once, on the first node)."""
    job = spec(work, "echo ran on $SLURMD_NODENAME >> ran.txt\n", 43, nodelist="n[0-1]",
               num_nodes=2)
    await runner.launch(job)  # this runner is n1: not the batch host
    assert runner.runs() == ((43, 0),)
    assert await runner.kill(43, 0, "ended")
    end = await ended(runner, 43)
    assert end.state == "CANCELLED"
    assert not (work / "ran.txt").exists()
    assert not list(work.glob("slurm-43*"))  # nor an output file of its own


def test_pattern_expansion() -> None:
    job = spec(Path("/w"), "", 5, name="nm", user="bob")
    assert expand_pattern("%j.%x.%N.%u.%A.%a.%%.%q", job, "c1") == "5.nm.c1.bob.5.4294967294.%.%q"
    arr = attrs.evolve(job, array_job_id=3, array_task_id=9)
    assert expand_pattern("%A_%a_%3a", arr, "c1") == "3_9_009"


async def test_output_truncated_on_first_run_appended_on_restart(
    runner: JobRunner, work: Path
) -> None:
    out = work / "slurm-7.out"
    out.write_text("stale\n")
    await runner.launch(spec(work, "echo run ${SLURM_RESTART_COUNT:-0}\n"))
    assert (await ended(runner, 7)).state == "COMPLETED"
    assert out.read_text() == "run 0\n"  # a first run truncates
    await runner.acknowledge(runner.endings())
    await runner.launch(spec(work, "echo run ${SLURM_RESTART_COUNT:-0}\n", restarts=1))
    end = await ended(runner, 7)
    assert end.restarts == 1
    assert out.read_text() == "run 0\nrun 1\n"  # a requeued run appends


async def test_exit_code_and_signal_reported(runner: JobRunner, work: Path) -> None:
    await runner.launch(spec(work, "exit 3\n", 1))
    await runner.launch(spec(work, "kill -USR1 $$\n", 2))
    end1, end2 = await ended(runner, 1), await ended(runner, 2)
    assert (end1.state, end1.exit_code, end1.signal) == ("FAILED", 3, 0)
    assert (end2.state, end2.signal) == ("FAILED", signal.SIGUSR1)


async def test_time_limit_sigterm_then_timeout(runner: JobRunner, work: Path) -> None:
    script = "trap 'echo got TERM; exit 5' TERM\necho started\nsleep 30 &\nwait\n"
    start = time.monotonic()
    await runner.launch(spec(work, script, time_limit=0.5))
    end = await ended(runner, 7)
    assert end.state == "TIMEOUT" and end.exit_code == 5
    assert 0.5 <= time.monotonic() - start < scaled(5)
    started, stepd, term = (work / "slurm-7.out").read_text().splitlines()
    assert (started, term) == ("started", "got TERM")
    assert re.fullmatch(r"slurmstepd-n1: error: \*\*\* JOB 7 ON n1 CANCELLED AT "
                        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d DUE TO TIME LIMIT \*\*\*", stepd), stepd


def test_time_limit_on_mock_clock(tmp_path: Path, work: Path) -> None:
    # An hour's limit and a job that ignores SIGTERM: trio's clock jumps, SIGKILL follows.
    clock = trio.testing.MockClock(autojump_threshold=0)
    runner = JobRunner(str(tmp_path / "spool"), "n1")
    runner.launch_timeout = math.inf  # the shim's answer is real time, not the mock clock's

    async def scenario() -> JobEnd:
        async with trio.open_nursery() as nursery:
            await nursery.start(runner.run)
            job = spec(work, "trap '' TERM\nsleep 60\n", time_limit=3600.0, kill_wait=30.0)
            await runner.launch(job)
            while not runner.endings():
                await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
        return runner.endings()[0]

    start = time.monotonic()
    end = trio.run(scenario, clock=clock)
    assert end.state == "TIMEOUT" and end.signal == signal.SIGKILL
    # The hour's limit and the 30 s KillWait passed on trio's clock, not the wall's: the bound
    # only has to be far below an hour (a loaded CI machine starts the shim slowly).
    assert time.monotonic() - start < 600


async def test_cancel_kills_the_whole_tree(runner: JobRunner, work: Path) -> None:
    # The grandchild leaves the job's process group and session (setsid): still killed.
    script = (
        "setsid sh -c 'echo $$ > escaped.pid; exec sleep 300' &\n"
        "sleep 300 &\necho $! > child.pid\nwait\n"
    )
    await runner.launch(spec(work, script))
    escaped = await read_pid(work / "escaped.pid")
    child = await read_pid(work / "child.pid")
    assert os.getpgid(escaped) != os.getpgid(child)
    assert runner.job_ids() == (7,)
    assert await runner.kill(7, 0, "cancelled")
    end = await ended(runner, 7)
    assert end.state == "CANCELLED" and end.signal == signal.SIGTERM
    assert runner.job_ids() == ()
    await wait_for(lambda: gone(escaped) and gone(child))


async def test_cancel_escalates_to_sigkill_after_kill_wait(runner: JobRunner, work: Path) -> None:
    await runner.launch(spec(work, "trap '' TERM\necho ready\nsleep 300\n", kill_wait=0.3))
    await wait_for(lambda: (work / "slurm-7.out").read_text() == "ready\n")
    assert await runner.kill(7)
    end = await ended(runner, 7)
    assert (end.state, end.signal) == ("CANCELLED", signal.SIGKILL)


async def test_signal_is_only_delivered(runner: JobRunner, work: Path) -> None:
    script = "trap 'echo usr1; exit 0' USR1\necho ready\nsleep 300 &\nwait\n"
    await runner.launch(spec(work, script))
    await wait_for(lambda: (work / "slurm-7.out").read_text() == "ready\n")
    assert await runner.kill(7, signal.SIGUSR1)
    end = await ended(runner, 7)
    assert end.state == "COMPLETED"  # a delivered signal is not a cancellation
    assert (work / "slurm-7.out").read_text() == "ready\nusr1\n"
    assert not await runner.kill(99)


async def test_launch_failures(runner: JobRunner, work: Path) -> None:
    cases = [
        (spec(work / "missing", "true\n", 1), "chdir to workdir"),
        (spec(work, "true\n", 2, stdout="no/such/dir/out"), "open output"),
        (attrs.evolve(spec(work, "true\n", 3), workdir="relative"), "not an absolute path"),
    ]
    for job, words in cases:
        with pytest.raises(LaunchError, match=words):
            await runner.launch(job)
        end = await ended(runner, job.job_id)
        assert end.state == "LAUNCH_FAILED" and words in end.message
    assert runner.job_ids() == ()


@pytest.mark.skipif(not ROOT, reason="privilege checks apply when rnoded runs as root")
async def test_root_refuses_unknown_uids(nursery: trio.Nursery, tmp_path: Path) -> None:
    # root's jobs are the controller's call (DisableRootJobs at submission), not rnoded's
    r = JobRunner(str(tmp_path / "spool"), "n1")
    await nursery.start(r.run)
    with pytest.raises(LaunchError, match="unknown uid 4000001"):
        await r.launch(spec(tmp_path, "true\n", 2, uid=4000001, gid=4000001))
    assert {e.state for e in r.endings()} == {"LAUNCH_FAILED"}


@pytest.mark.skipif(not ROOT, reason="only root can run a job as another user")
async def test_root_runs_job_as_its_user(nursery: trio.Nursery) -> None:
    import pwd

    nobody = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="ranch-jobs-"))
    try:
        os.chmod(base, 0o755)
        work = base / "work"
        work.mkdir(mode=0o777)
        os.chmod(work, 0o777)
        r = JobRunner(str(base / "spool"), "n1")
        await nursery.start(r.run)
        await r.launch(spec(work, "id -u; id -g\n", 1, uid=nobody.pw_uid, gid=nobody.pw_gid))
        assert (await ended(r, 1)).state == "COMPLETED"
        out = work / "slurm-1.out"
        assert out.read_text().split() == [str(nobody.pw_uid), str(nobody.pw_gid)]
        assert out.stat().st_uid == nobody.pw_uid  # opened as the job's user
    finally:
        jobstore.remove(base)


async def test_readopted_after_rnoded_restart(tmp_path: Path, work: Path) -> None:
    spool = str(tmp_path / "spool")
    first = JobRunner(spool, "n1")
    running = spec(work, "while [ ! -e go ]; do sleep 0.05; done\necho done\n", 1)
    finishes = spec(work, "while [ ! -e go2 ]; do sleep 0.05; done\nexit 4\n", 2)
    async with trio.open_nursery() as nursery:
        await nursery.start(first.run)
        await first.launch(running)
        await first.launch(finishes)
        nursery.cancel_scope.cancel()  # rnoded dies; its jobs do not
    # Job 2 ends while no rnoded watches it.
    (work / "go2").touch()
    path = jobstore.job_dir(spool, finishes)
    await wait_for(lambda: (path / "status.json").exists())
    await wait_for(lambda: gone(jobstore.read_json(path / "pids.json")["shim_pid"]))
    second = JobRunner(spool, "n1")
    async with trio.open_nursery() as nursery:
        await nursery.start(second.run)
        assert second.job_ids() == (1,)
        assert [(e.job_id, e.state, e.exit_code) for e in second.endings()] == [(2, "FAILED", 4)]
        (work / "go").touch()
        end = await ended(second, 1)
        assert end.state == "COMPLETED"
        assert (work / "slurm-1.out").read_text() == "done\n"
        nursery.cancel_scope.cancel()


async def test_readopted_job_keeps_its_kill(tmp_path: Path, work: Path) -> None:
    spool = str(tmp_path / "spool")
    first = JobRunner(spool, "n1")
    async with trio.open_nursery() as nursery:
        await nursery.start(first.run)
        await first.launch(spec(work, "echo $$ > pid\nsleep 300\n", 1, time_limit=0.3))
        await wait_for(lambda: (work / "pid").exists())
        nursery.cancel_scope.cancel()
    second = JobRunner(spool, "n1")
    async with trio.open_nursery() as nursery:
        await nursery.start(second.run)
        end = await ended(second, 1)  # the limit counts from the script's start
        assert end.state == "TIMEOUT"
        nursery.cancel_scope.cancel()


async def test_endings_repeat_until_acknowledged(runner: JobRunner, work: Path) -> None:
    await runner.launch(spec(work, "true\n"))
    end = await ended(runner, 7)
    path = jobstore.job_dir(runner.spool_dir, spec(work, ""))
    assert runner.endings() == (end,) and runner.endings() == (end,)
    await runner.acknowledge([attrs.evolve(end, restarts=5)])  # not this run's report
    assert runner.endings() == (end,)
    assert (path / "end.json").exists()
    await runner.acknowledge([end])
    assert runner.endings() == () and not path.exists()


async def test_unacknowledged_ending_survives_restart(tmp_path: Path, work: Path) -> None:
    spool = str(tmp_path / "spool")
    first = JobRunner(spool, "n1")
    async with trio.open_nursery() as nursery:
        await nursery.start(first.run)
        await first.launch(spec(work, "true\n"))
        end = await ended(first, 7)
        nursery.cancel_scope.cancel()
    second = JobRunner(spool, "n1")
    async with trio.open_nursery() as nursery:
        await nursery.start(second.run)
        assert second.endings() == (end,)
        nursery.cancel_scope.cancel()


async def test_kill_list_kills_without_an_ending(runner: JobRunner, work: Path) -> None:
    await runner.launch(spec(work, "echo $$ > pid\nsleep 300\n"))
    pid = await read_pid(work / "pid")
    path = jobstore.job_dir(runner.spool_dir, spec(work, ""))
    await runner.kill_silently([7, 12345])
    await wait_for(lambda: runner.job_ids() == () and not path.exists())
    await wait_for(lambda: gone(pid))
    await trio.sleep(0.1)
    assert runner.endings() == ()


async def test_a_silent_kill_writes_its_note_before_the_directory_goes(
        runner: JobRunner, work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow disk under the note of why the job ends: the job dies at once on SIGTERM, and its
    directory is removed only after the note is whole (CI met the two interleaved: the note's
    file landed in a directory being removed, which then stayed in the spool)."""
    events: list[str] = []
    save, remove = jobstore.save_ending, jobstore.remove

    def slow_save(path: Path, state: str, silent: bool) -> None:
        events.append("note begins")
        time.sleep(0.5)
        save(path, state, silent)
        events.append("note whole")

    def logged_remove(path: Path) -> None:
        events.append("removed")
        remove(path)

    monkeypatch.setattr(jobstore, "save_ending", slow_save)
    monkeypatch.setattr(jobstore, "remove", logged_remove)
    await runner.launch(spec(work, "echo $$ > pid\nsleep 300\n"))
    pid = await read_pid(work / "pid")
    path = jobstore.job_dir(runner.spool_dir, spec(work, ""))
    await runner.kill_silently([7])
    await wait_for(lambda: runner.job_ids() == () and gone(pid))
    assert events == ["note begins", "note whole", "removed"]
    assert not path.exists() and runner.endings() == ()


async def test_repeated_launch_is_idempotent(runner: JobRunner, work: Path) -> None:
    job = spec(work, "while [ ! -e go ]; do sleep 0.05; done\necho once\n")
    await runner.launch(job)
    await runner.launch(job)  # the controller retried: still one run
    assert runner.job_ids() == (7,)
    (work / "go").touch()
    await ended(runner, 7)
    assert (work / "slurm-7.out").read_text() == "once\n"


async def test_a_newer_run_replaces_a_stale_one_and_never_the_reverse(runner: JobRunner,
                                                                     work: Path) -> None:
    """The controller requeued the job (run 1) while run 0 still runs here: run 0 is ended
    without a report of its own and run 1 starts; a late LaunchJob of run 0 is refused."""
    job = spec(work, "echo run $SLURM_RESTART_COUNT; sleep 300\n")
    await runner.launch(job)
    assert runner.runs() == ((7, 0),)
    await runner.launch(attrs.evolve(job, restarts=1))
    assert runner.runs() == ((7, 1),)
    with pytest.raises(LaunchError, match="already runs"):
        await runner.launch(job)
    assert not await runner.kill(7, 0, "stale", run=0)  # a kill meant for run 0 spares run 1
    assert runner.runs() == ((7, 1),)
    await runner.kill(7, 0, "cancelled", run=1)
    end = await ended(runner, 7)
    assert (end.state, end.restarts) == ("CANCELLED", 1)
    assert [e.restarts for e in runner.endings()] == [1]  # run 0 reported nothing


async def test_kill_while_launching_is_applied_once_it_runs(runner: JobRunner, work: Path) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.launch, spec(work, "sleep 300\n"))
        await wait_for(lambda: 7 in runner._launching, 5)
        assert await runner.kill(7, 0, "cancelled")  # the shim has not answered yet
    end = await ended(runner, 7)
    assert end.state == "CANCELLED"


async def test_kill_read_right_behind_its_launch_is_kept(runner: JobRunner, work: Path) -> None:
    # The session reads LaunchJob, then KillJob, before the launch task has run (an allocation
    # released the moment it was granted): the kill must wait for the launch, not be lost.
    s = spec(work, "sleep 300\n", restarts=2)
    runner.announce(s)
    assert not await runner.kill(7, 0, "cancelled", run=1)  # another run's kill: not this one
    assert await runner.kill(7, 0, "cancelled", run=2)
    await runner.launch(s)
    end = await ended(runner, 7)
    assert (end.state, end.restarts) == ("CANCELLED", 2)


async def test_a_kill_kept_for_an_ended_run_spares_the_next_launch(runner: JobRunner,
                                                                 work: Path) -> None:
    first = spec(work, "exit 0\n")
    await runner.launch(first)
    await ended(runner, 7)
    runner.announce(first)  # a repeated LaunchJob of the run that ended, with a kill behind it
    assert await runner.kill(7, 0, "cancelled", run=0)
    await runner.launch(first)  # a no-op: that run ended here
    await runner.acknowledge(runner.endings())
    await runner.launch(spec(work, "sleep 300\n", restarts=1))
    # a kept kill is applied before launch() returns: the requeued run must not be ending
    assert not runner.running[7].ending
    await runner.kill(7, 0, "cancelled")
    await ended(runner, 7)


def test_ending_states_from_the_shim_status(tmp_path: Path) -> None:
    """How a status file maps to a state; OUT_OF_MEMORY needs SIGKILL and a risen oom_kill
    count (a real OOM kill needs a memory-limited cgroup this test machine may not have)."""
    from ranch.noded.runningjob import ending_of

    job = spec(tmp_path, "")

    def state(status: dict | None, ending: str = "") -> tuple[str, int, int]:
        path = tmp_path / "status.json"
        path.unlink(missing_ok=True)
        if status is not None:
            jobstore.write_json(path, status)
        end = ending_of(job, tmp_path, ending, 1.0)
        return end.state, end.exit_code, end.signal

    kill9 = {"exit_code": 0, "signal": 9, "started_at": 1.0, "ended_at": 2.0}
    assert state({**kill9, "oom": True}) == ("OUT_OF_MEMORY", 0, 9)
    assert state({**kill9, "oom": False}) == ("FAILED", 0, 9)
    assert state({**kill9, "signal": 15, "oom": True}) == ("FAILED", 0, 15)
    assert state({**kill9, "oom": True}, "CANCELLED") == ("CANCELLED", 0, 9)
    exact = {"exit_code": 137, "signal": 0, "oom": True, "oom_exact": True}
    assert state(exact) == ("OUT_OF_MEMORY", 137, 0)  # its own cgroup: sh reported the kill
    assert state({"exit_code": 0, "signal": 0}) == ("COMPLETED", 0, 0)
    assert state({"launch_error": "setuid: nope"}) == ("LAUNCH_FAILED", 1, 0)
    assert state(None) == ("FAILED", 0, 0)  # the supervisor itself was killed
    assert state(None, "TIMEOUT") == ("TIMEOUT", 0, 0)


def _memory_cgroups_usable() -> bool:
    from ranch.noded import jobcgroup

    if not ROOT:
        return False
    try:
        return jobcgroup._parent() is not None
    except OSError:
        return False


@pytest.mark.skipif(not _memory_cgroups_usable(), reason="needs root and a writable cgroup fs")
async def test_memory_limit_enforced_and_oom_reported(runner: JobRunner, work: Path) -> None:
    import sys

    from ranch.noded import jobcgroup

    hog = f"{sys.executable} -c \"a = b'x' * (400 << 20); print('survived')\"\n"
    await runner.launch(spec(work, hog, 1, mem_mib=48))
    await runner.launch(spec(work, "echo small\n", 2, mem_mib=48))
    end1, end2 = await ended(runner, 1, 30), await ended(runner, 2)
    # sh saw its child die of SIGKILL (137); the job's own cgroup says the kernel did it
    assert (end1.state, end1.exit_code) == ("OUT_OF_MEMORY", 128 + signal.SIGKILL)
    assert "survived" not in (work / "slurm-1.out").read_text()
    assert end2.state == "COMPLETED"
    parent, _ = jobcgroup._parent()  # type: ignore[misc]
    assert not list(parent.glob("n1_*"))  # each job's cgroup went with it


async def test_broken_records_do_not_stop_the_runner(tmp_path: Path, work: Path) -> None:
    spool = tmp_path / "spool"
    garbage = spool / "jobs" / "1.0"
    garbage.mkdir(parents=True)
    (garbage / "spec.json").write_text("{not json")
    odd = jobstore.create(str(spool), spec(work, "true\n", 2), {}, None)
    jobstore.write_json(odd / "pids.json", {"shim_pid": 1})  # no start time
    runner = JobRunner(str(spool), "n1")
    async with trio.open_nursery() as nursery:
        await nursery.start(runner.run)
        assert not garbage.exists()  # unreadable: dropped
        await runner.launch(spec(work, "true\n", 3))  # and the runner works
        assert (await ended(runner, 3)).state == "COMPLETED"
        nursery.cancel_scope.cancel()


async def test_a_starting_job_is_in_the_beat(nursery: trio.Nursery, runner: JobRunner,
                                            work: Path) -> None:
    # the controller declares a job lost when a beat leaves it out: a slow start must not
    nursery.start_soon(runner.launch, spec(work, "sleep 300\n", 5))
    await wait_for(lambda: 5 in runner._launching)
    assert 5 not in runner.running and runner.job_ids() == (5,)
    await wait_for(lambda: 5 in runner.running)
    assert runner.job_ids() == (5,)
    await runner.kill(5, 0, "test done")
    await ended(runner, 5)
    assert runner.job_ids() == ()


async def test_a_step_waits_for_its_job_still_starting_here(runner: JobRunner, work: Path,
                                                            nursery: trio.Nursery) -> None:
    """wait_started (a LaunchStep right behind its job's LaunchJob): the job once it runs;
    at once None for a job neither running nor announced, and at once what runs when another
    run of it is asked for (the step runner refuses that)."""
    assert await runner.wait_started(8, 0) is None
    job = spec(work, "sleep 30", job_id=8)
    runner.announce(job)  # the session's reader does this as the LaunchJob arrives
    waiting: list = []

    async def step() -> None:
        waiting.append(await runner.wait_started(8, 0))

    nursery.start_soon(step)
    await trio.sleep(0.05)
    assert waiting == []  # the launch has not begun: the step waits
    await runner.launch(job)
    await wait_for(lambda: bool(waiting))
    assert waiting[0] is runner.running[8]
    with trio.fail_after(scaled(1)):
        assert await runner.wait_started(8, 1) is runner.running[8]  # not run 1: not waited for
    await runner.kill(8, 0, "test")
    await ended(runner, 8)


async def test_a_run_is_reported_until_its_ending_is_recorded(runner: JobRunner,
                                                              work: Path) -> None:
    """D3: at every scheduling point from launch to acknowledgement a beat would find the run
    in runs() or its ending in endings(), never in neither (the controller requeued such a run)."""
    gaps: list[str] = []
    done = trio.Event()

    async def watch(runs: set[tuple[int, int]]) -> None:
        while not done.is_set():
            held = set(runner.runs())
            ends = {(e.job_id, e.restarts) for e in runner.endings()}
            gaps.extend(f"{r} neither held nor ended" for r in runs - held - ends)
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as n:
        runner.announce(spec(work, "exit 0\n", 1))
        n.start_soon(watch, {(1, 0)})
        await runner.launch(spec(work, "exit 0\n", 1))
        await ended(runner, 1)
        done.set()
    assert gaps == []
    # an old run ending while the newer one starts: both are named, the new one throughout
    old = tmp = work / "old.pid"
    await runner.launch(spec(work, f"trap 'sleep 0.3; exit 0' TERM; echo $$ > {tmp}; "
                                   "while :; do sleep 0.05; done\n", 2))
    await read_pid(old)
    done = trio.Event()
    async with trio.open_nursery() as n:
        runner.announce(spec(work, "sleep 0.2\n", 2, restarts=1))
        n.start_soon(watch, {(2, 1)})
        await wait_for(lambda: (2, 0) in runner.runs() and (2, 1) in runner.runs())
        await runner.launch(spec(work, "sleep 0.2\n", 2, restarts=1))
        await ended(runner, 2)
        done.set()
    assert gaps == []
    assert [(e.job_id, e.restarts) for e in runner.endings()] == [(1, 0), (2, 1)]


async def test_a_launch_cut_before_its_script_started_is_given_back(
        nursery: trio.Nursery, tmp_path: Path, work: Path) -> None:
    """rnoded died after writing a run's record, before its shim started the script: the next
    rnoded takes the run's claim, drops the record and reports nothing (the controller sends the
    run again), rather than a FAILED run that never ran; a shim that starts late refuses it."""
    import subprocess
    import sys

    from ranch.noded.jobenv import append_output, input_path, job_environment, output_paths
    from ranch.noded.joblaunch import SHIM, identity

    spool = str(tmp_path / "spool")
    s = spec(work, f"touch {work}/ran\n", 5)
    stdout, stderr = output_paths(s, "n1")
    launch = dict(identity(s, "n1", ROOT), env=job_environment(s, "n1"), workdir=s.workdir,
                  stdout=stdout, stderr=stderr, append=append_output(s),
                  stdin=input_path(s, "n1"))
    path = jobstore.create(spool, s, launch, None)  # ...and rnoded was SIGKILLed here
    runner = JobRunner(spool, "n1")
    await nursery.start(runner.run)
    assert (runner.runs(), runner.endings(), path.exists()) == ((), (), False)
    # the shim had been spawned and starts only now, after the new rnoded gave the run up
    path = jobstore.create(spool, s, launch, None)
    assert jobstore.claim(path)
    shim = await trio.run_process([sys.executable, "-S", "-E", SHIM, str(path)],
                                  capture_stdout=True, stdin=subprocess.DEVNULL)
    assert shim.stdout.startswith(b"fail the run was given up")
    await trio.sleep(0.2)
    assert not (work / "ran").exists()
    # the shim's own claim comes first in an ordinary launch: the script runs
    await runner.launch(s)
    assert (await ended(runner, 5)).state == "COMPLETED" and (work / "ran").exists()


def parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return int(data[data.rindex(b")") + 2 :].split()[1])


async def test_later_jobs_are_forked_by_the_supervisors_server(tmp_path: Path,
                                                               work: Path) -> None:
    """Once a job ran, a server forks each next job's supervisor (no Python start per job):
    such a job's output, stderr log, exit and ending are a cold start's; one server serves
    job after job; a server killed is replaced, its launch meanwhile started cold; a job
    outlives the server's end as it outlives rnoded's, and none outlives the runner."""
    r = JobRunner(str(tmp_path / "spool"), "n1")
    async with trio.open_nursery() as nursery:
        await nursery.start(r.run)
        assert r.spare.pid is None  # a node that never ran a job keeps no server
        await r.launch(spec(work, "echo first\n", 1))
        assert r.running[1].proc is not None  # the first starts cold: our own child
        assert (await ended(r, 1)).state == "COMPLETED"
        await wait_for(lambda: r.spare.pid is not None)
        server = r.spare.pid
        await r.launch(spec(work, "while [ ! -e go ]; do sleep 0.01; done\n"
                                  "echo second; echo oops >&2; exit 3\n", 2, stderr="e-%j"))
        assert parent(r.running[2].shim_pid) == server  # forked, not started
        # it waits for `go` too: a job that ended at once was reaped before its parent was read
        await r.launch(spec(work, "while [ ! -e go ]; do sleep 0.01; done\necho third\n", 3))
        assert parent(r.running[3].shim_pid) == server  # the same server, job after job
        (work / "go").touch()
        end = await ended(r, 2)
        assert (end.state, end.exit_code) == ("FAILED", 3)
        assert (work / "slurm-2.out").read_text() == "second\n"
        assert (work / "e-2").read_text() == "oops\n"
        assert (await ended(r, 3)).state == "COMPLETED"
        assert (work / "slurm-3.out").read_text() == "third\n"
        # a server killed: the next launch starts its supervisor itself, and a new server comes
        os.kill(server, signal.SIGKILL)
        await wait_for(lambda: gone(server))
        await r.launch(spec(work, "echo fourth\n", 4))
        assert r.running[4].proc is not None  # started cold: our own child
        assert (await ended(r, 4)).state == "COMPLETED"
        await wait_for(lambda: r.spare.pid not in (None, server))
        last = r.spare.pid
        await r.launch(spec(work, "while [ ! -e go5 ]; do sleep 0.01; done\necho fifth\n", 5))
        assert parent(r.running[5].shim_pid) == last
        shim = r.running[5].shim_pid
        nursery.cancel_scope.cancel()
    assert r.spare.pid is None
    await wait_for(lambda: gone(last))  # told to go (end of file) and gone
    assert not gone(shim)  # its job runs on without it
    (work / "go5").touch()
    path = jobstore.job_dir(str(tmp_path / "spool"), spec(work, "", 5))
    await wait_for(lambda: (path / "status.json").exists())
    assert (work / "slurm-5.out").read_text() == "fifth\n"
