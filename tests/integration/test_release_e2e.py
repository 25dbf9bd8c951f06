"""Releases acknowledged or retried (issue 30): ralloc and rrun whose command ends while rctld is
down (SIGKILLed or SIGTERMed) keep trying to release their allocation until the restarted
rctld answers: exit status and recorded end agree. One that finally cannot reach a controller
says so and exits 1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ranch.cli.allocation import Allocation
from ranch.cli.controller import Target
from tests.deadline import scaled

from .cluster import Cluster, free_port
from .test_jobs_e2e import jobs_cluster, start


def spawn(c: Cluster, module: str, *argv: str) -> subprocess.Popen:
    env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
    return subprocess.Popen([sys.executable, "-m", module, *argv], cwd=c.dir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def state(c: Cluster, job_id: int) -> str:
    from ranch.protocol import messages as m

    got = c.request(m.GetJobs(job_ids=(job_id,)))
    return got.jobs[0]["state"]


@pytest.mark.parametrize(("module", "sig"), [("ranch.cli.ralloc", signal.SIGKILL),
                                             ("ranch.cli.rrun", signal.SIGTERM)])
def test_a_release_waits_out_a_controller_restart(tmp_path: Path, module: str,
                                                  sig: signal.Signals) -> None:
    with jobs_cluster(tmp_path, ["n1"]) as c:
        start(c)
        go = tmp_path / "go"
        cmd = spawn(c, module, "sh", "-c",
                    f"echo $SLURM_JOB_ID; while [ ! -e {go} ]; do sleep 0.05; done")
        assert cmd.stdout is not None
        job_id = int(cmd.stdout.readline())
        c.wait_for(lambda: state(c, job_id) == "RUNNING", 20, what="the allocation running")
        assert c.ctld is not None
        c.ctld.send_signal(sig)
        c.ctld.wait(10)
        c.ctld = None
        # a controller that cannot answer yet holds the port: each release try is counted
        with socket.create_server(("127.0.0.1", c.port)) as stand_in:
            stand_in.settimeout(60)
            go.touch()  # the command ends while no controller answers
            for _ in range(3):  # its first try and two more
                conn, _addr = stand_in.accept()
                conn.close()
            assert cmd.poll() is None, "gave up on its release while rctld was restarting"
        c.start_ctld()
        _out, err = cmd.communicate(timeout=60)
        assert cmd.returncode == 0, err
        assert "Unable to clean up" not in err
        c.wait_for(lambda: state(c, job_id) == "COMPLETED", 30, what="the allocation COMPLETED")


def test_a_release_that_never_gets_through_is_said_and_fails_the_command(capsys) -> None:
    """Nothing listens at the controller's address: the release is retried for its patience,
    then ralloc says it could not and its exit status is 1 whatever its command's."""
    port = free_port()  # closed: every try is refused at once
    key = Path(os.environ.get("TMPDIR", "/tmp")) / f"release-{os.getpid()}.key"
    from ranch.protocol.auth import create_key

    create_key(str(key))
    try:
        alloc = Allocation(Target("127.0.0.1", port, str(key), "test"), "ralloc", salloc=True)
        alloc.job_id, alloc.patience = 42, 1.5
        started = time.monotonic()
        alloc.release(0)
        took = time.monotonic() - started
    finally:
        key.unlink()
    assert 1.0 <= took < scaled(10), took  # tried for its patience, not once, not for ever
    assert alloc.unreleased and alloc.exit_status(0) == 1 and alloc.exit_status(3) == 3
    err = capsys.readouterr().err
    assert "ralloc: error: Unable to clean up job allocation 42:" in err
    assert "(tried for 1.5 s)" in err
