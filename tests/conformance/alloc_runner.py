"""Allocations on both systems: salloc and srun outside a job run by their names (Slurm's own;
Ranch's ralloc and rrun through the ranch-slurm-shims scripts, first on PATH), the same command
lines in the same order, and what each left: exit codes, stdout, stderr lines, the job's
`scontrol show job -o` fields once it ended.

    runs = run_both(slurm, ranch)      # {"slurm": {scenario: Run}, "ranch": {...}}
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from ranch.cli import shims
from tests.conformance.runner import parse_show_job

ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"})
# One command line each; the order matters: no-shell's allocation holds every node while the
# -I and waiting scenarios run, and is cancelled to let the waiting ones start.
SCENARIOS = ("salloc env", "salloc exit 3", "srun hostname", "srun kill -9", "srun exit 137",
             "revoked", "no-shell", "-I", "-I2", "salloc killed pending", "srun killed pending",
             "salloc waits", "srun waits", "salloc killed", "srun killed")
# slurmctld looks at InactiveLimit every 30 s (PERIODIC_TIMEOUT) counted from its start: a
# killed salloc's job ends at the first look past the limit, a minute or so at most; one killed
# while its job pended is failed once slurmctld cannot tell it of the start (MessageTimeout)
KILLED_WAIT = 100.0


@attrs.define
class Run:
    """What one scenario left on one system."""

    rc: int | None = None
    out: str = ""
    err: list[str] = attrs.Factory(list)
    job_id: int = 0
    fields: dict[str, str] = attrs.Factory(dict)  # scontrol show job -o, once ended
    running: str = ""  # squeue's %T while the allocation is held (no-shell)


class Side:
    """One system's commands under Slurm's names, run from its work directory."""

    def __init__(self, name: str, env: dict[str, str], workdir: Path) -> None:
        self.name = name
        self.env = env
        self.workdir = workdir
        self.runs: dict[str, Run] = {}
        self.seen: list[int] = []  # the jobs pending_job found
        self.error: BaseException | None = None

    def sh(self, line: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(["sh", "-c", line], cwd=self.workdir, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def spawn(self, line: str, name: str) -> subprocess.Popen:
        """`line` in the background, stdout and stderr in files (read by `done`)."""
        with open(self.workdir / f"{name}.out", "wb") as out, \
                open(self.workdir / f"{name}.err", "wb") as err:
            return subprocess.Popen(["sh", "-c", line], cwd=self.workdir, env=self.env,
                                    stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def done(self, proc: subprocess.Popen, name: str, timeout: float = 60) -> Run:
        rc = proc.wait(timeout)
        return Run(rc, (self.workdir / f"{name}.out").read_text(),
                   (self.workdir / f"{name}.err").read_text().splitlines())

    def jobs(self, states: str = "all") -> dict[int, str]:
        out = self.sh(f"squeue -h -t {states} -o '%i %T'").stdout.split()
        return {int(j): s for j, s in zip(out[::2], out[1::2], strict=True)}

    def newest(self) -> int:
        return max(self.jobs(), default=0)

    def started_since(self, before: int) -> bool:
        """The newest job is newer than `before` and runs."""
        jobs = self.jobs()
        new = max(jobs, default=0)
        return new > before and jobs[new] == "RUNNING"

    def until(self, pred: Any, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: timed out waiting for {what}")
            time.sleep(0.05)

    def ended(self, run: Run, timeout: float = 30) -> Run:
        """The job's fields once it ended (a released allocation completes on its nodes)."""
        fields: dict[str, str] = {}

        def look() -> bool:
            nonlocal fields
            text = self.sh(f"scontrol show job -o {run.job_id}").stdout
            fields = parse_show_job(text).get(run.job_id, {})
            return fields.get("JobState") in ENDED

        self.until(look, f"job {run.job_id} to end", timeout)
        run.fields = fields
        return run

    def command(self, scenario: str, line: str) -> Run:
        """Run `line` to its end; its job is the newest one then."""
        done = self.sh(line)
        run = Run(done.returncode, done.stdout, done.stderr.splitlines(), self.newest())
        self.runs[scenario] = self.ended(run)
        return run

    def drive(self) -> None:
        try:
            self._drive()
        except BaseException as exc:  # reported by the fixture, with the other side's runs
            self.error = exc

    def _drive(self) -> None:
        self.command("salloc env", "salloc -N2 env")
        self.command("salloc exit 3", "salloc -N1 sh -c 'exit 3'")
        self.command("srun hostname", "srun -N2 hostname")
        self.command("srun kill -9", "srun -N2 sh -c 'kill -9 $$'")
        self.command("srun exit 137", "srun -N1 sh -c 'exit 137'")
        # scancel under a running command: it goes on, salloc says so and exits with it
        proc = self.spawn("salloc -N1 sh -c 'echo started $SLURM_JOB_ID; sleep 2; echo after'",
                          "revoked")
        out = self.workdir / "revoked.out"
        self.until(lambda: out.read_text().endswith("\n"), "the command to start")
        job = int(out.read_text().split()[1])
        self.sh(f"scancel {job}")
        run = self.done(proc, "revoked")
        run.job_id = job
        self.runs["revoked"] = self.ended(run)
        # an allocation without a command holds every node while the next ones ask
        done = self.sh("salloc --no-shell -N2 --exclusive")
        holder = Run(done.returncode, done.stdout, done.stderr.splitlines(), self.newest())
        holder.running = self.jobs().get(holder.job_id, "")
        self.runs["no-shell"] = holder
        self.command("-I", "salloc -I -N1 true")
        self.command("-I2", "salloc -I2 -N1 true")
        gone: list[subprocess.Popen] = []  # killed while their jobs pend
        try:
            for scenario in ("salloc killed pending", "srun killed pending"):
                gone.append(self.popen_killable([scenario.split()[0], "-N1", "sleep", "300"]))
                self.runs[scenario] = Run(job_id=self.pending_job(scenario))
            for proc in gone:
                proc.kill()
                proc.wait(10)
            procs, waiting = {}, []
            for scenario, line in (("salloc waits", "salloc -N1 sh -c 'echo inner'"),
                                   ("srun waits", "srun -N1 hostname")):
                procs[scenario] = self.spawn(line, scenario.replace(" ", "-"))
                waiting.append(self.pending_job(scenario))
            self.sh(f"scancel {holder.job_id}")
            for (scenario, proc), job in zip(procs.items(), waiting, strict=True):
                run = self.done(proc, scenario.replace(" ", "-"))
                run.job_id = job
                self.runs[scenario] = self.ended(run)
            self.ended(holder)
            for scenario in ("salloc killed pending", "srun killed pending"):
                self.ended(self.runs[scenario], KILLED_WAIT)
        finally:
            for proc in gone:
                end_session(proc.pid)
        self._killed()

    def popen_killable(self, argv: list[str]) -> subprocess.Popen:
        """salloc/srun itself (no shell between: it is what gets SIGKILL), in a session of its
        own (end_session ends what it leaves)."""
        return subprocess.Popen(argv, cwd=self.workdir, env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                start_new_session=True)

    def pending_job(self, what: str) -> int:
        """The id of the job just submitted, once it pends."""
        found: list[int] = []

        def look() -> bool:
            found[:] = [j for j in self.jobs("PD") if j not in self.seen]
            return len(found) == 1

        self.until(look, f"{what}'s job pending")
        self.seen.append(found[0])
        return found[0]


    def _killed(self) -> None:
        """salloc and srun SIGKILLed while their command runs: the allocation outlives them
        until InactiveLimit (or not at all)."""
        procs: dict[str, subprocess.Popen] = {}
        try:
            for scenario in ("salloc killed", "srun killed"):
                before = self.newest()
                procs[scenario] = self.popen_killable([scenario.split()[0], "-N1", "sleep", "300"])
                self.until(lambda b=before: self.started_since(b), f"{scenario}'s job running")
                self.runs[scenario] = Run(job_id=self.newest())
            for scenario, proc in procs.items():
                proc.kill()
                self.runs[scenario].rc = proc.wait(10)
            for scenario in procs:
                self.ended(self.runs[scenario], KILLED_WAIT)
        finally:
            for proc in procs.values():
                end_session(proc.pid)


def end_session(sid: int) -> None:
    """SIGKILL every process of session `sid` (what a killed salloc left running here)."""
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                session = int(f.read().rsplit(")", 1)[1].split()[3])
            if session == sid:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue


def slurm_side(slurm: Any) -> Side:
    return Side("slurm", slurm.env(), slurm.workdir)


def ranch_side(ranch: Any) -> Side:
    """Ranch's commands under Slurm's names: the shims first on PATH, nothing of Slurm's."""
    bin_dir = ranch.dir / "shims"
    shims.write(bin_dir)
    env = ranch.env()
    env.pop("SLURM_CONF", None)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return Side("ranch", env, ranch.workdir)


def run_both(slurm: Any, ranch: Any) -> dict[str, dict[str, Run]]:
    """Every scenario on both systems at once (one thread each; every scenario of a system
    runs after the one before it, since most take all its nodes)."""
    sides = [slurm_side(slurm), ranch_side(ranch)]
    threads = [threading.Thread(target=s.drive, name=s.name) for s in sides]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in sides:
        if s.error is not None:
            raise AssertionError(f"{s.name}: {s.error!r}; its runs: {s.runs}") from s.error
    return {s.name: s.runs for s in sides}

