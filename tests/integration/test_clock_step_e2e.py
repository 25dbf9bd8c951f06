"""rctld's wall clock stepped 300 s forward or back (libfaketime on rctld alone; its monotonic
clock, trio's, runs on as a real step leaves it) while a --begin job waits: the job runs once,
as run 0, once the clocks agree again.

Forward, the node's frames look 300 s old: rctld accepts them for MessageTimeout after its step
(they may have waited out the step in the socket; ctld/nodes/stalls.py) while the node refuses every
frame rctld signs, LaunchJob included. Each registration in that window used to take the launch
it never got for a lost job and requeue it: two restarts, and the job never ran. A run the node
never named is now sent again, the same run (ctld/jobs/jobreconcile.py, ctld/jobs/jobstart.py).
"""

from __future__ import annotations

import glob
import time
from pathlib import Path

import pytest

from ranch.protocol import messages as m

from .cluster import Cluster, wait_for
from .test_exactly_once import cluster, marks, records, submit

LIBS = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
              + glob.glob("/usr/lib/faketime/libfaketime.so.1"))
pytestmark = pytest.mark.skipif(not LIBS, reason="libfaketime is not installed "
                                                 "(Debian package faketime)")


@pytest.mark.parametrize("step", ["+300", "-300"])
def test_a_begin_job_runs_once_across_a_controller_clock_step(tmp_path: Path, step: str
                                                               ) -> None:
    # SlurmdTimeout=30: the node, cut off by the step, is not DOWN before the clocks agree
    # again (a DOWN node's job is requeued, as Slurm's: that is not what is tested here).
    # MessageTimeout=4: the window in which rctld takes the node's old-looking frames after
    # its forward step is long enough for the node's reconnections to land in it.
    c = cluster(tmp_path, ["n1"], cpus=1, timeout=30)
    c.conf_path.write_text(c.conf_path.read_text().replace("MessageTimeout=2",
                                                           "MessageTimeout=4"))
    offset = tmp_path / "faketime"  # libfaketime reads it at every clock call
    offset.write_text("+0\n")
    env = {"LD_PRELOAD": LIBS[0], "FAKETIME_TIMESTAMP_FILE": str(offset),
           "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    with c:
        c.ctld = c._spawn("rctld", [
            "-m", "ranch.ctld", "-f", str(c.conf_path), "--listen", f"127.0.0.1:{c.port}",
            "--state-dir", c.state_dir, "--key-file", c.key_file], env)
        wait_for(lambda: isinstance(c.request(m.Ping(), timeout=1), m.Pong), 20, "rctld")
        c.start_node("n1")
        c.wait_for(lambda: c.state("n1") == "IDLE", 30, what="n1 IDLE")
        [jid] = submit(c, "true", begin_time=time.time() + 8) or [0]
        assert records(c)[jid]["reason"] == "BeginTime"
        offset.write_text(step + "\n")
        # Held until the node has been refused three times and rctld refuses the node's frames
        # as stale: forward, BeginTime is past for rctld, it launches into refusal, and its
        # window of taking the node's old-looking frames (MessageTimeout) has closed, every
        # registration in it made; back, the node's frames are refused from the start.
        c.wait_for(lambda: _stepped_and_refused(c), 60, what="the step's refusals")
        offset.write_text("+0\n")
        c.wait_for(lambda: records(c)[jid]["state"] == "COMPLETED", 60, what="the job run")
        rec = records(c)[jid]
        assert rec["restarts"] == 0, ("a launch the node never got was taken for a lost job:\n"
                                      + c.log("rctld")[-4000:])
        assert {k: n for k, n in marks(tmp_path).items() if k[0] == jid} == {(jid, 0): 1}


def _stepped_and_refused(c: Cluster) -> bool:
    ctld = c.log("rctld")
    jumped = ctld.find("controller wall clock jumped")
    return (jumped >= 0 and "code=stale" in ctld[jumped:]
            and c.log("n1").count("refused a frame from the controller") >= 3)
