"""Allocations (issue 20): what ralloc (salloc) and rrun outside a job (`srun -N2 hostname`)
share: submit a job without a batch script, say on stderr what salloc/srun 22.05 say while it
waits, hand its SLURM_* environment to what runs inside it, and release it (Slurm's
slurm_complete_job) with how that ended.

    rc = run_allocated(target, opts, run_step)   # run_step(job_id, env) -> exit status

The controller offers no push to a waiting command (Slurm's slurmctld connects back to
salloc/srun): the waiting side polls GetJobs for its one job, from 50 ms up to 1 s apart.
"""

from __future__ import annotations

import os
import sys
import time

from ranch.cli.alloc_env import environment
from ranch.cli.controller import CliError, Refused, Target, Unreachable, reason_lines, request

TYPE_CHECKING = False  # typing stays off ralloc's start
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any
else:
    import _signal as signal  # signal's own module imports enum (and more): a tenth of the start

# The signals that end a wait for resources (salloc's sig_array): the job is withdrawn.
WAIT_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE, signal.SIGTERM,
                signal.SIGUSR1, signal.SIGUSR2)
FIRST_PAUSE, MAX_PAUSE = 0.05, 1.0  # seconds between looks at a waiting job
ALREADY_DONE = "already completing or completed"  # ESLURM_ALREADY_DONE's words
# seconds a release (or a withdrawal) is retried while the controller cannot be reached: an
# rctld restart takes a few; after that the command says it could not, exits 1, and rctld ends
# the allocation itself once its holder has been silent long enough (ctld/jobs/inactive.py)
RELEASE_PATIENCE = 60.0
# seconds a wait for resources goes on while the controller cannot be reached (an rctld restart,
# a failover): the pending job is in its saved state and is granted after the restart, to the
# command still waiting for it; past this the command says so and exits 1
WAIT_PATIENCE = 120.0
MAX_AWAY_PAUSE = 2.0  # the longest pause between tries while the controller is away
# rrun's option attributes (argparse names) -> sbatch's option names (cli/sbatch_options.py)
OPTS = (("nodes", "nodes"), ("ntasks", "ntasks"), ("ntasks_per_node", "ntasks-per-node"),
        ("cpus_per_task", "cpus-per-task"), ("gpus_per_task", "gpus-per-task"),
        ("gpus_per_node", "gpus-per-node"), ("gpus", "gpus"), ("nodelist", "nodelist"),
        ("exclude", "exclude"), ("partition", "partition"), ("time", "time"),
        ("job_name", "job-name"), ("mem", "mem"), ("mem_per_cpu", "mem-per-cpu"),
        ("constraint", "constraint"), ("account", "account"), ("qos", "qos"),
        ("chdir", "chdir"), ("exclusive", "exclusive"))


class Signalled(BaseException):
    """A signal ended the wait (a BaseException: no `except Exception` may swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def values_of(opts: Any) -> dict[str, object]:
    """sbatch's option values (long name -> text or True) from an argparse-like namespace;
    None, False, 0 and "" are "not given"."""
    values: dict[str, object] = {}
    for attr, long in OPTS:
        value = getattr(opts, attr, None)
        if value is None or value is False or value == "" or value == 0:
            continue
        values[long] = True if value is True else str(value)
    if values.get("exclusive") is True:
        values["exclusive"] = None  # sbatch_values.exclusive: the bare flag
    return values


def submit_body(values: dict[str, object], *, name: str, command: str = "",
                environ: Mapping[str, str] | None = None, who: str | None = "ralloc"
                ) -> dict[str, object]:
    """The SubmitJob body of an allocation: sbatch's reading of the resource options, no script
    and no environment (nothing runs in the job but the steps its owner starts); `who` says
    the sizes' warnings (None: rrun, whose step sizes say them)."""
    from ranch.cli import sbatch_request

    environ = os.environ if environ is None else environ
    sbatch_request.memory_choice(values, values)
    body = sbatch_request.body(values, "", command, [], environ, who)
    body.update(allocation=True, env=[], name=values.get("job-name") or name)
    if "ntasks" not in values and "ntasks-per-node" not in values:
        # salloc/srun without -n ask for a task a node (scontrol: NumTasks=2 for -N2)
        ntasks, nodes = body["ntasks"], body["num_nodes"]
        assert isinstance(ntasks, int) and isinstance(nodes, int)  # resources()'s, at least 1
        body["ntasks"] = max(ntasks, nodes)
    return body


class Allocation:
    """One allocation job, from its submission to its release, speaking as `prog` (salloc's
    words when `salloc`, else srun's)."""

    def __init__(self, target: Target, prog: str, *, salloc: bool, quiet: bool = False) -> None:
        self.target = target
        self.prog = prog
        self.salloc = salloc
        self.quiet = quiet
        self.job_id = 0
        self.record: dict = {}
        self.decided: dict = {}  # the submission's reply held the record: the first look
        self.released = False
        self.unreleased = False  # the release never reached the controller: exit non-zero
        self.patience = RELEASE_PATIENCE
        self.wait_patience = WAIT_PATIENCE

    def say(self, text: str) -> None:
        if not self.quiet:
            print(f"{self.prog}: {text}", file=sys.stderr, flush=True)

    def error(self, text: str) -> None:
        print(f"{self.prog}: error: {text}", file=sys.stderr, flush=True)

    # -- submission and the wait ---------------------------------------------------------------

    def submit(self, body: dict) -> int:
        """Submit, with the waiting signals held off until the job id is known (a Ctrl-C during
        the request then withdraws the job it made)."""
        held = signal.pthread_sigmask(signal.SIG_BLOCK, WAIT_SIGNALS)
        try:
            try:
                reply = request(self.target, "SubmitJob", body, want="SubmitReply")
            except Refused as exc:
                where = f" ({exc.field})" if exc.field else ""
                why = reason_lines(self.prog, exc.message)
                raise CliError(f"Job submit/allocate failed: {why}{where}") from None
            self.job_id = int(reply["job_id"])
            job = reply.get("job")
            if isinstance(job, dict) and job.get("job_id") == self.job_id:
                self.decided = job
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a held signal arrives here
        return self.job_id

    def fetch(self) -> dict:
        """The job's record now (a job the controller no longer holds reads as ended)."""
        from ranch.cli.job_requests import fetch_jobs

        _, jobs = fetch_jobs(self.target, (self.job_id,))
        for rec in jobs:
            if rec.get("job_id") == self.job_id:
                self.record = rec
                return rec
        self.record = {"job_id": self.job_id, "state": "COMPLETED"}
        return self.record

    def wait(self, immediate: float | None = None,
             clock: Callable[[], float] = time.monotonic) -> dict:
        """Until the job runs, saying what salloc/srun say; its record. CliError when it ended
        first or (`immediate`) was not granted within that many seconds."""
        start = clock()
        pause, queued, configuring = FIRST_PAUSE, False, False
        # salloc 22.05 (measured): -I / -I1 is refused at once, unqueued ("Requested nodes are
        # busy"); -I2 and up queue and give up when that time is over ("Connection timed out")
        at_once = immediate is not None and immediate <= 1
        while True:
            if self.decided:  # already in the submission's reply (issue 35): one request fewer
                rec = self.record = self.decided
                self.decided = {}
            else:
                rec = self.look(clock)
            state = rec.get("state")
            refused = at_once and state == "FAILED" and rec.get("reason") == "BadConstraints"
            if refused or (state == "PENDING" and immediate is not None
                           and clock() - start >= immediate):
                if not refused:  # rctld gives -I its answer; an older one does not: withdraw
                    self.cancel()
                self.released = True
                self.error("Unable to allocate resources: " + (
                    "Requested nodes are busy" if at_once else "Connection timed out"))
                self.say(f"Job allocation {self.job_id} has been revoked.")
                raise SystemExit(1)
            if state == "PENDING":
                if not queued and not at_once:
                    queued = True
                    if self.salloc:
                        self.say(f"Pending job allocation {self.job_id}")
                    self.say(f"job {self.job_id} queued and waiting for resources")
            elif state in ("CONFIGURING", "RUNNING"):
                if queued:
                    queued = False
                    self.say(f"job {self.job_id} has been allocated resources")
                if self.salloc and not (queued or configuring):
                    self.say(f"Granted job allocation {self.job_id}")
                if state == "RUNNING":
                    if configuring:
                        self.say(f"Nodes {rec.get('nodes')} are ready for job")
                    return rec
                if not configuring:
                    configuring = True
                    self.say("Waiting for resource configuration")
            else:
                self.released = True
                raise CliError(f"Job allocation {self.job_id} has been revoked")
            time.sleep(pause)
            pause = min(pause * 1.5, MAX_PAUSE)

    def look(self, clock: Callable[[], float] = time.monotonic) -> dict:
        """fetch(), across a controller restart: while it cannot be reached, ask again (the
        pauses doubling up to MAX_AWAY_PAUSE) for up to `wait_patience` seconds; then say so
        and exit 1 (the controller ends the allocation, unclaimed, if it grants it later)."""
        away_since: float | None = None
        pause = FIRST_PAUSE * 4
        while True:
            try:
                rec = self.fetch()
            except Unreachable as exc:
                now = clock()
                if away_since is None:
                    away_since = now
                    self.say(f"{exc}; still waiting for job {self.job_id} "
                             f"(for up to {self.wait_patience:g} s)")
                if now - away_since >= self.wait_patience:
                    self.released = True  # nothing to release where nothing answers
                    self.error(f"Unable to allocate resources: the controller could not be "
                               f"reached for {self.wait_patience:g} s while job "
                               f"{self.job_id} waited; giving up")
                    raise SystemExit(1) from None
                time.sleep(pause)
                pause = min(pause * 2, MAX_AWAY_PAUSE)
                continue
            if away_since is not None:
                self.say(f"controller reachable again; job {self.job_id} still waits")
            return rec

    def cluster_name(self) -> str:
        try:
            return str(request(self.target, "Ping", {}, want="Pong").get("cluster_name") or "")
        except CliError:
            return ""

    def alive(self) -> bool | None:
        """Tell rctld the command still runs (InactiveLimit). True: the allocation still runs;
        False: it ended; None: no answer (the controller is away, or too old to know)."""
        body = {"action": "alive", "job_ids": [self.job_id], **_who()}
        try:
            reply = request(self.target, "JobControl", body, want="JobResult")
        except CliError:
            return None
        if reply.get("ok"):
            return True
        errors = reply.get("errors") or ()
        return False if any(ALREADY_DONE in e for e in errors) else None

    def step_signal(self, signum: int, patience: float = 2.0) -> int:
        """`signum` when the job's last step ended by that signal (its tasks were killed), else
        0. srun ends its job with the status its tasks ended with, so Slurm shows a step
        killed by SIGKILL as ExitCode 0:9 where srun exits 137; a task's own `exit 137` stays
        137:0. The step's end reaches the controller from its nodes, so it may lag rrun's."""
        deadline = time.monotonic() + patience
        pause = FIRST_PAUSE
        while True:
            try:
                steps = self.fetch().get("steps") or ()
            except CliError:
                return 0
            step = steps[-1] if steps else {}
            ended = step and step.get("state") not in ("RUNNING", "PENDING", "COMPLETING")
            if ended or time.monotonic() >= deadline:
                return signum if step.get("signal") == signum else 0
            time.sleep(pause)
            pause = min(pause * 1.5, 0.25)

    # -- the end --------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Withdraw the job (Slurm's slurm_complete_job(NO_VAL)): CANCELLED."""
        if not self.job_id or self.released:
            return
        self.released = True
        self._settle("CancelJobs", {"job_ids": [self.job_id], **_who()})

    def release(self, exit_code: int = 0, signum: int = 0) -> None:
        """The command ended: COMPLETED, or FAILED with its exit code or signal. A job that
        already ended (cancelled, out of time) is left as it is, as salloc leaves it."""
        if not self.job_id or self.released:
            return
        self.released = True
        self._settle("JobControl", {"action": "complete", "job_ids": [self.job_id], **_who(),
                                    "exit_code": exit_code if 0 <= exit_code <= 255 else 1,
                                    "signal": signum})

    def _settle(self, type_name: str, body: dict) -> None:
        """Send the release until the controller answers it (a repeat after a lost reply
        finds the job already ended: done), for up to `patience` seconds while it cannot be
        reached; otherwise say so and mark the command's exit non-zero."""
        deadline, pause = time.monotonic() + self.patience, FIRST_PAUSE * 4
        while True:
            try:
                reply = request(self.target, type_name, body, want="JobResult")
                break
            except Refused as exc:
                why = exc.message
            except CliError as exc:
                if time.monotonic() + pause < deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, MAX_PAUSE * 2)
                    continue
                why = f"{exc.message} (tried for {self.patience:g} s)"
            self.unreleased = True
            self.error(f"Unable to clean up job allocation {self.job_id}: {why}")
            return
        errors = [e for e in reply.get("errors") or () if ALREADY_DONE not in e]
        if errors:
            self.unreleased = True
            self.error(f"Unable to clean up job allocation {self.job_id}: {errors[0]}")

    def exit_status(self, rc: int) -> int:
        """The command's exit status: `rc`, or 1 when its allocation could not be released
        (the controller then ends it CANCELLED or TIMEOUT, never COMPLETED)."""
        return 1 if self.unreleased and rc == 0 else rc


def _who() -> dict[str, object]:
    """Who asks (as rcancel says it; under MUNGE rctld takes the credential's user instead)."""
    from ranch.cli.credential import user_name

    return {"user": user_name(), "uid": os.getuid()}


class _WaitSignals:
    """While waiting for resources: the signals salloc and srun take as "give up" raise
    Signalled (the caller withdraws the job); the caller's handlers come back afterwards."""

    def __init__(self, signals: Iterable[int] = WAIT_SIGNALS) -> None:
        self.signals = tuple(signals)
        self.saved: dict[int, Any] = {}

    def _raise(self, signum: int, frame: object) -> None:
        raise Signalled(signum)

    def __enter__(self) -> _WaitSignals:
        for sig in self.signals:
            self.saved[sig] = signal.signal(sig, self._raise)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self.saved.items():
            signal.signal(sig, old)


def allocate(alloc: Allocation, body: dict, *, immediate: float | None = None) -> dict:
    """Submit and wait until the job runs; a signal meanwhile withdraws it (salloc: "Job
    aborted due to signal", exit 1; srun: "Job allocation N has been revoked")."""
    with _WaitSignals():
        try:
            alloc.submit(body)
            return alloc.wait(immediate)
        except (Signalled, KeyboardInterrupt):
            alloc.cancel()
            if alloc.job_id:
                alloc.say(f"Job allocation {alloc.job_id} has been revoked" +
                          ("." if alloc.salloc else ""))
            if alloc.salloc:
                alloc.say("Job aborted due to signal")
            else:
                alloc.say(f"Force Terminated JobId={alloc.job_id}")
            raise SystemExit(1) from None


def run_allocated(target: Target, opts: Any, run_step: Callable[[int, dict[str, str]], int],
                  *, environ: Mapping[str, str] | None = None) -> int:
    """rrun outside an allocation (srun -N2 hostname): allocate from rrun's options, call
    `run_step(job_id, env)` once the job runs (env: the allocation's SLURM_* variables, as
    salloc sets them), release the job with run_step's status, and return it. The status is
    an exit code, or -SIG for a signal (as subprocess reports one: returned as 128+SIG). Any
    exception out of run_step (KeyboardInterrupt included) withdraws the job (CANCELLED)
    before it propagates. While run_step runs, signals are its own: SIGTERM's default action
    would end the process before the release, so run_step should catch it and return; a job
    left so ends at its time limit. run_step says the allocation's holder is alive while it
    runs (rctld's InactiveLimit): rrun's step I/O does, from its loop (cli/alive.py)."""
    from ranch.cli.slurm_names import prog

    # the job is named for the command (srun -N2 hostname: JobName=hostname, Command=hostname)
    argv = list(getattr(opts, "command", None) or getattr(opts, "argv", None) or ())
    values = values_of(opts)
    alloc = Allocation(target, prog("rrun"), salloc=False, quiet=bool(getattr(opts, "quiet", 0)))
    body = submit_body(values, name=os.path.basename(argv[0]) if argv else "rrun",
                       command=argv[0] if argv else "", environ=environ, who=None)
    body["held_by"] = "rrun"
    submit_dir = os.getcwd()
    record = allocate(alloc, body)
    env = environment(record, values, alloc.cluster_name(), submit_dir)
    try:
        rc = run_step(alloc.job_id, env)
    except BaseException:
        alloc.cancel()
        raise
    code, signum = (0, -rc) if rc < 0 else (rc, 0)
    if code > 128:  # srun's 128+SIG: a task killed by SIG, or one that exited so?
        signum = alloc.step_signal(code - 128)
        code = 0 if signum else code
    alloc.release(code, signum)
    return alloc.exit_status(128 + signum if signum else code)
