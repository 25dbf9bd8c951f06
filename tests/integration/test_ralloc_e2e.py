"""ralloc (salloc) and rrun's allocation outside a job (issue 20) against a real rctld and real
rnoded processes: the command's exit code becomes the job's end, the allocation's environment,
Ctrl-C while waiting, an allocation revoked under its command (rcancel, the time limit, a
signal to ralloc), --no-shell, and ranch.cli.allocation.run_allocated with a step of its own."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.deadline import scaled

from .cluster import REPO, Cluster
from .test_jobs_e2e import cli, jobs_cluster, start


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = jobs_cluster(tmp_path_factory.mktemp("ralloc"), ["n1", "n2"])
    with cluster:
        start(cluster)
        yield cluster


@pytest.fixture(autouse=True)
def _idle_between_tests(c: Cluster) -> Iterator[None]:
    yield
    for line in cli(c, "rqueue", "-h", "-o", "%i").stdout.split():
        cli(c, "rcancel", line, check=False)
    c.wait_for(lambda: not cli(c, "rqueue", "-h").stdout.strip(), 20, what="an empty queue")


def ralloc(c: Cluster, *argv: str) -> subprocess.CompletedProcess:
    return c.run_cli("ranch.cli.ralloc", *argv)


def spawn(c: Cluster, name: str, *argv: str, module: str = "ranch.cli.ralloc") -> subprocess.Popen:
    """ralloc in the background, its stderr in a file (`err(c, name)` reads it)."""
    env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
    with open(c.dir / f"{name}.err", "wb") as err:
        return subprocess.Popen([sys.executable, "-m", module, *argv], cwd=c.dir, env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True)


def first_line(p: subprocess.Popen, timeout: float = 30.0) -> str:
    """The command's first line of output; a failure, not a hang, when none comes."""
    assert p.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(p.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            p.kill()
            raise AssertionError(f"no output from {p.args} in {timeout:g} s")
    return p.stdout.readline()


def err(c: Cluster, name: str) -> list[str]:
    return (c.dir / f"{name}.err").read_text().splitlines()


def show(c: Cluster, job_id: int) -> dict[str, str]:
    """`rcontrol show job -o`'s keys and values."""
    line = cli(c, "rcontrol", "show", "job", "-o", str(job_id)).stdout.strip()
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


def ended(c: Cluster, job_id: int, state: str) -> dict[str, str]:
    """The job once it reached `state` (a released allocation completes on its nodes first)."""
    c.wait_for(lambda: show(c, job_id)["JobState"] == state, 20, what=f"job {job_id} {state}")
    return show(c, job_id)


def job_id_in(lines: list[str]) -> int:
    for line in lines:
        if "job allocation" in line.lower() or "queued" in line:
            return int(line.rstrip(".").split()[-1] if "allocation" in line else line.split()[2])
    raise AssertionError(f"no job id in {lines}")


def test_the_commands_exit_code_is_ralloc_s_and_fails_the_job(c: Cluster) -> None:
    done = ralloc(c, "-N2", "sh", "-c", "echo $SLURM_JOB_NODELIST; exit 3")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "n[1-2]\n"
    lines = done.stderr.splitlines()
    n = job_id_in(lines)
    assert lines == [f"ralloc: Granted job allocation {n}",
                     f"ralloc: Relinquishing job allocation {n}"]
    rec = ended(c, n, "FAILED")
    assert (rec["Reason"], rec["ExitCode"], rec["BatchFlag"], rec["JobName"], rec["Command"]) == (
        "NonZeroExitCode", "3:0", "0", "interactive", "(null)")
    assert "StdOut" not in rec and rec["NodeList"] == "n[1-2]"
    # racct: the job line alone (an allocation has no .batch step)
    out = cli(c, "racct", "-j", str(n), "-P", "-o", "JobID,JobName,State,ExitCode").stdout
    assert out.splitlines() == ["JobID|JobName|State|ExitCode", f"{n}|interactive|FAILED|3:0"]


def test_a_command_that_exits_0_completes_the_job_in_its_environment(c: Cluster) -> None:
    done = ralloc(c, "-J", "named", "-n", "2", "--mem", "10M", "env")
    assert done.returncode == 0, done.stderr
    env = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    n = int(env["SLURM_JOB_ID"])
    assert {k: v for k, v in env.items() if k.startswith("SLURM_") and k not in (
        "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST")} == {
        "SLURM_JOB_ID": str(n), "SLURM_JOBID": str(n), "SLURM_JOB_NAME": "named",
        "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "n[1-2]",
        "SLURM_NODELIST": "n[1-2]", "SLURM_NODE_ALIASES": "(null)",
        "SLURM_JOB_PARTITION": "main", "SLURM_JOB_CPUS_PER_NODE": "1(x2)",
        "SLURM_TASKS_PER_NODE": "1(x2)", "SLURM_NTASKS": "2", "SLURM_NPROCS": "2",
        "SLURM_MEM_PER_NODE": "10", "SLURM_CLUSTER_NAME": "jobs"}
    assert env["SLURM_SUBMIT_DIR"] == str(REPO) and env["SLURM_SUBMIT_HOST"]
    assert env["RANCH_JOB_ID"] == str(n) and env["PATH"] == os.environ["PATH"]
    rec = ended(c, n, "COMPLETED")
    assert (rec["ExitCode"], rec["Reason"]) == ("0:0", "None")


def test_ctrl_c_while_waiting_withdraws_the_job(c: Cluster) -> None:
    stop = c.dir / "stop-holder"
    holder = spawn(c, "holder", "-N2", "sh", "-c",
                   f"echo started; while [ ! -e {stop} ]; do sleep 0.1; done")
    try:
        assert first_line(holder) == "started\n"
        waiting = spawn(c, "waiting", "-N1", "true")
        c.wait_for(lambda: len(err(c, "waiting")) >= 2, 20, what="ralloc to wait")
        n = job_id_in(err(c, "waiting"))
        assert show(c, n)["JobState"] == "PENDING"
        waiting.send_signal(signal.SIGINT)
        assert waiting.wait(20) == 1
        assert err(c, "waiting") == [f"ralloc: Pending job allocation {n}",
                                     f"ralloc: job {n} queued and waiting for resources",
                                     f"ralloc: Job allocation {n} has been revoked.",
                                     "ralloc: Job aborted due to signal"]
        rec = ended(c, n, "CANCELLED")
        assert (rec["ExitCode"], rec["Reason"]) == ("0:0", "Resources")
    finally:
        stop.touch()
        holder.wait(20)


def test_a_revoked_allocation_leaves_its_command_running_as_salloc_does(c: Cluster) -> None:
    stop = c.dir / "stop-revoked"
    p = spawn(c, "revoked", "-N1", "sh", "-c",
              f"echo started; while [ ! -e {stop} ]; do sleep 0.1; done; echo after")
    assert first_line(p) == "started\n"
    n = job_id_in(err(c, "revoked"))
    cli(c, "rcancel", str(n))
    c.wait_for(lambda: len(err(c, "revoked")) == 2, 20, what="ralloc to see the revocation")
    assert p.poll() is None  # the command runs on
    stop.touch()
    assert p.wait(20) == 0 and p.stdout.read() == "after\n"
    assert err(c, "revoked") == [f"ralloc: Granted job allocation {n}",
                                 f"ralloc: Job allocation {n} has been revoked."]
    rec = ended(c, n, "CANCELLED")
    assert rec["ExitCode"] == "0:0"


def test_kill_command_signals_the_command_when_the_allocation_is_revoked(c: Cluster) -> None:
    p = spawn(c, "killed", "-K", "sh", "-c", "echo started; exec sleep 60")
    assert first_line(p) == "started\n"
    n = job_id_in(err(c, "killed"))
    began = time.monotonic()
    cli(c, "rcancel", str(n))
    assert p.wait(20) == 1  # SIGTERM: salloc's exit status 1
    assert time.monotonic() - began < scaled(10)
    assert err(c, "killed")[-1] == f"ralloc: Job allocation {n} has been revoked."
    assert ended(c, n, "CANCELLED")["ExitCode"] == "0:0"


def test_the_time_limit_revokes_the_allocation(c: Cluster) -> None:
    p = spawn(c, "timeout", "-t", "0:02", "-K", "sh", "-c", "exec sleep 60")
    assert p.wait(30) == 1
    n = job_id_in(err(c, "timeout"))
    assert err(c, "timeout")[-1] == (f"ralloc: Job {n} has exceeded its time limit and its "
                                     "allocation has been revoked.")
    rec = ended(c, n, "TIMEOUT")
    assert (rec["ExitCode"], rec["Reason"]) == ("0:0", "TimeLimit")


def test_sigterm_to_ralloc_ends_the_allocation_and_waits_for_the_command(c: Cluster) -> None:
    stop = c.dir / "stop-term"
    p = spawn(c, "term", "sh", "-c", f"echo started; while [ ! -e {stop} ]; do sleep 0.1; done")
    assert first_line(p) == "started\n"
    n = job_id_in(err(c, "term"))
    p.send_signal(signal.SIGTERM)
    ended(c, n, "CANCELLED")
    assert p.poll() is None
    stop.touch()
    assert p.wait(20) == 0


def test_no_shell_allocates_and_leaves_the_allocation(c: Cluster) -> None:
    done = ralloc(c, "--no-shell", "-N1")
    assert done.returncode == 0, done.stderr
    n = job_id_in(done.stderr.splitlines())
    assert show(c, n)["JobState"] == "RUNNING"
    cli(c, "rcancel", str(n))
    ended(c, n, "CANCELLED")


STEP = """\
import sys
from ranch.cli.allocation import run_allocated
from ranch.cli.controller import find_target
class Opts:
    nodes, ntasks, argv, exclusive = "2", 0, ["/bin/hostname", "-s"], False
def step(job_id, env):
    print(job_id, env["SLURM_JOB_NODELIST"], env["SLURM_JOB_NAME"], flush=True)
    if sys.argv[1] == "raise":
        raise RuntimeError("step failed")
    return int(sys.argv[1])
sys.exit(run_allocated(find_target(None, None, None), Opts(), step))
"""


@pytest.mark.parametrize(("how", "rc", "state", "code"), [
    ("5", 5, "FAILED", "5:0"), ("-9", 137, "FAILED", "0:9"), ("raise", 1, "CANCELLED", "0:0")])
def test_run_allocated_runs_a_step_in_an_allocation_and_releases_it(
        c: Cluster, how: str, rc: int, state: str, code: str) -> None:
    env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
    done = subprocess.run([sys.executable, "-c", STEP, how], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == rc, done.stderr
    job_id, nodes, name = done.stdout.split()
    assert (nodes, name) == ("n[1-2]", "hostname")
    assert not [line for line in done.stderr.splitlines() if line.startswith("rrun:")]
    rec = ended(c, int(job_id), state)
    assert (rec["ExitCode"], rec["Command"], rec["BatchFlag"]) == (code, "/bin/hostname", "0")


def test_help_version_and_a_bad_option() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "ranch.cli.ralloc"]
    out = subprocess.run([*run, "--help"], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == 0 and out.stdout.startswith("Usage: ralloc [OPTIONS...] [command")
    assert "--kill-command" in out.stdout and "--wrap" not in out.stdout
    out = subprocess.run([*run, "-V"], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.stdout.startswith("ranch 0.2.0 (ralloc; speaks as slurm 22.05.8)")
    out = subprocess.run([*run, "--wrap", "true"], capture_output=True, text=True, env=env,
                         cwd=REPO)
    assert out.returncode == 255 and "unrecognized option '--wrap'" in out.stderr
