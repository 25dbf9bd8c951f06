"""Starting one job: who it runs as, its launch record, the shim's start and its one-line answer."""

from __future__ import annotations

import hashlib
import logging
import os
import pwd
import subprocess
from pathlib import Path
from typing import BinaryIO

import attrs
import trio

from ranch.noded import jobcgroup, jobstore
from ranch.noded.jobenv import append_output, input_path, job_environment, node_index, output_paths
from ranch.noded.runningjob import HOLDER, RunningJob
from ranch.noded.spareshim import Forked, SpareShim
from ranch.protocol.messages import JobSpec, StepSpec

log = logging.getLogger("rnoded.jobs")

SHIM = str(Path(__file__).with_name("jobshim.py"))
LAUNCH_TIMEOUT = 30.0  # the shim answers within milliseconds; this only bounds a wedged start


class LaunchError(Exception):
    """The job could not be started; the message says why, for the controller and the user."""


class LaunchFailed(Exception):
    """start_job could not start the job; the runner records its LAUNCH_FAILED ending in `path`
    (the job's directory, which may not exist) and raises LaunchError(message)."""

    def __init__(self, path: Path, message: str, *, node_fault: bool = False) -> None:
        super().__init__(message)
        self.path = path
        self.message = message
        self.node_fault = node_fault  # the node's spool or supervisor, not the job's request


def identity(spec: JobSpec | StepSpec, node: str, as_root: bool) -> dict:
    """Who the job's processes run as: the submitter when rnoded is root, else rnoded's user."""
    if not as_root:
        return {"drop": False, "uid": os.getuid(), "gid": os.getgid(), "groups": []}
    # root's jobs: the controller decided (DisableRootJobs, ctld/rpc/permissions.py), and only
    # a cluster-key holder or a MUNGE-proven root can submit one
    try:
        pw = pwd.getpwuid(spec.uid)
    except KeyError:
        raise LaunchError(f"unknown uid {spec.uid} on node {node}") from None
    groups = os.getgrouplist(pw.pw_name, spec.gid)
    return {"drop": True, "uid": spec.uid, "gid": spec.gid, "groups": groups}


def _record(spool_dir: str, spec: JobSpec, launch: dict, owner: tuple[int, int] | None
            ) -> tuple[Path, BinaryIO]:
    """The job's record, and its shim.log opened for the supervisor's stderr: one trip to a
    thread, not two (each is on the way to the script's start)."""
    path = jobstore.create(spool_dir, spec, launch, owner)
    return path, open(path / "shim.log", "wb")


async def start_job(
    spec: JobSpec,
    *,
    spool_dir: str,
    node: str,
    python: str,
    as_root: bool,
    memory_cgroups: bool,
    timeout: float,
    spare: SpareShim | None = None,
) -> RunningJob:
    """Write the job's record and start its shim (the spare already started, when there is
    one); returns once the script runs. Raises LaunchFailed when it cannot."""
    spec, ident, path, log_file = await _write_record(spec, spool_dir, node, as_root,
                                                      memory_cgroups)
    proc = await _start_shim(path, log_file, python, spare)
    words = (await _shim_answer(proc, path, timeout)).split()
    if len(words) != 3:  # an older shim's "ok SCRIPT_PID": the rest is in pids.json
        pids = await trio.to_thread.run_sync(jobstore.read_json, path / "pids.json")
        assert pids is not None, "the shim writes pids.json before it says ok"
        words = [words[0], pids["shim_start"], pids["started_at"]]
    if isinstance(proc, Forked):
        proc.close()  # the server's child: watched through a pidfd of its own, as if re-adopted
    job = RunningJob(
        spec,
        path,
        proc.pid,
        int(words[1]),
        int(words[0]),
        float(words[2]),
        proc=proc if isinstance(proc, trio.Process) else None,
    )
    log.info(
        "job %d started: script pid %d as uid %d in %s",
        spec.job_id,
        job.script_pid,
        ident["uid"],
        spec.workdir,
    )
    return job


async def _write_record(spec: JobSpec, spool_dir: str, node: str, as_root: bool,
                        memory_cgroups: bool) -> tuple[JobSpec, dict, Path, BinaryIO]:
    """The job's launch record written (and its memory cgroup made): the spec as this node runs
    it, who runs it, the job's directory and its shim.log opened for the supervisor."""
    path = jobstore.job_dir(spool_dir, spec)
    try:
        ident = identity(spec, node, as_root)
        if not os.path.isabs(spec.workdir):
            raise LaunchError(f"workdir {spec.workdir!r} is not an absolute path")
        stdout, stderr = output_paths(spec, node)
        if node_index(spec, node) != 0 or not spec.script:
            # Not the batch host: the script runs on the allocation's first node only, as
            # sbatch runs it. This node holds the job's resources (and its cgroup) with a
            # placeholder until the controller ends the job here. An allocation has no
            # script at all: every node of it holds.
            spec = attrs.evolve(spec, script=HOLDER, argv=())
            stdout = stderr = os.devnull
        launch = dict(
            ident,
            env=job_environment(spec, node),
            workdir=spec.workdir,
            stdout=stdout,
            stderr=stderr,
            append=append_output(spec),  # --open-mode, requeues (noded/jobenv.py)
            stdin=input_path(spec, node),
        )
        owner = (spec.uid, spec.gid) if ident["drop"] else None
        if as_root and spec.mem_mib > 0 and memory_cgroups:
            # the spool directory's digest in the name keeps two rnoded of one host apart (two
            # clusters, or two test clusters, may both run job 2 on a node n1): a shared cgroup
            # summed their memory and lent one job the other's OOM kill
            tag = hashlib.sha1(os.path.abspath(spool_dir).encode()).hexdigest()[:8]
            name = f"{node}_{spec.job_id}.{spec.restarts}_{tag}"
            launch["cgroup"] = await trio.to_thread.run_sync(jobcgroup.create, name, spec.mem_mib)
        path, log_file = await trio.to_thread.run_sync(_record, spool_dir, spec, launch, owner)
    except (LaunchError, OSError, ValueError) as exc:
        message = str(exc) if isinstance(exc, LaunchError) else f"job record: {exc}"
        raise LaunchFailed(path, message, node_fault=isinstance(exc, OSError)) from exc
    return spec, ident, path, log_file


async def _start_shim(path: Path, log_file: BinaryIO, python: str,
                      spare: SpareShim | None) -> trio.Process | Forked:
    """The job's supervisor, forked by the server when there is one, else started (log_file is
    closed either way)."""
    try:
        proc: trio.Process | Forked | None = None if spare is None else await spare.take(path)
        if proc is None:
            proc = await trio.lowlevel.open_process(
                [python, "-S", "-E", SHIM, str(path)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log_file,
                start_new_session=True,
                env={"PATH": os.environ.get("PATH", os.defpath)},
                cwd="/",
            )
    except OSError as exc:
        raise LaunchFailed(path, f"cannot start the job supervisor: {exc}",
                           node_fault=True) from exc
    finally:
        log_file.close()
    return proc


async def _shim_answer(proc: trio.Process | Forked, path: Path, timeout: float) -> str:
    """The rest of the shim's "ok SCRIPT_PID SHIM_START STARTED_AT" line; LaunchFailed on any
    other answer."""
    assert proc.stdout is not None
    line = b""
    with trio.move_on_after(timeout):
        while not line.endswith(b"\n"):
            chunk = await proc.stdout.receive_some(4096)
            if not chunk:
                break
            line += chunk
    await proc.stdout.aclose()
    word, _, rest = line.decode(errors="replace").strip().partition(" ")
    if word != "ok":
        # The supervisor's own word ("failed: no such workdir") is about the job; its silence
        # is about the node.
        if not word:
            log_text = await trio.to_thread.run_sync((path / "shim.log").read_bytes)
            rest = (
                "job supervisor failed: "
                + (log_text.decode(errors="replace").strip().splitlines() or ["no answer"])[-1]
            )
            with trio.move_on_after(1):
                proc.kill()
        await proc.wait()
        raise LaunchFailed(path, rest, node_fault=not word)
    return rest
