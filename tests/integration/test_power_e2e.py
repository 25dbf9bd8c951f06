"""Power save with real programs and real daemons on loopback: examples/resume.sh starts an rnoded,
examples/suspend.sh stops it. idle -> % -> ~ with the resume file checked; rctld SIGKILLed while
nodes are `#`; a late boot after ResumeTimeout; programs get a clean signal mask."""

from __future__ import annotations

import json
import os
import signal
import time

from ranch.conf.hostlist import fold
from ranch.ctld.state import statefile
from ranch.protocol import messages as m

from .cluster import REPO, Cluster, wait_for

EXAMPLES = REPO / "examples"
POWER = """\
SuspendProgram={suspend}
ResumeProgram={resume}
ResumeFailProgram={resume_fail}
SuspendTime={suspend_time}
SuspendTimeout=1
ResumeTimeout={resume_timeout}
SlurmctldParameters=power_save_interval=1
"""
CONF = """\
ClusterName=ptest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=5
MessageTimeout=3
ReturnToService=1
{power}
NodeName=c[1-2] CPUs=1 RealMemory=64 State=CLOUD
PartitionName=cloud Nodes=c[1-2] Default=YES
"""


def _cluster(tmp_path, *, resume: str = "", suspend_time: int = 2,
             resume_timeout: int = 20) -> Cluster:
    fail = tmp_path / "resume_fail.sh"
    fail.write_text(f'#!/bin/sh\necho "$1" >> {tmp_path}/resume_failed\n')
    fail.chmod(0o755)
    power = POWER.format(suspend=EXAMPLES / "suspend.sh", resume=resume or EXAMPLES / "resume.sh",
                         resume_fail=fail, suspend_time=suspend_time,
                         resume_timeout=resume_timeout)
    c = Cluster(tmp_path, ["c1", "c2"], conf_text="-")
    c.conf_path.write_text(CONF.format(port=c.port, power=power))
    return c


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _power_dir(c: Cluster):
    return os.path.join(c.state_dir, "power-nodes")


def test_resume_registers_then_idle_suspends_through_the_example_scripts(tmp_path) -> None:
    c = _cluster(tmp_path)
    # rctld starts with SIGTERM blocked, as a ResumeProgram under Slurm inherits it; the rnoded
    # that resume.sh starts must still stop on suspend.sh's SIGTERM.
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        c.start_ctld()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    try:
        snap = c.snapshot()
        assert {snap[n]["compact"] for n in ("c1", "c2")} == {"idle~"}  # CLOUD starts off
        items = dict(c.request(m.GetConfig()).items)
        assert items["ResumeRate"] == "300 nodes/min (budget 300 now)"
        assert items["SuspendRate"] == "60 nodes/min (budget 60 now)"
        r = c.request(m.UpdateNodes("c[1-2]", "POWER_UP", None, "root"))
        assert r.ok, r.errors
        c.wait_for(lambda: all(c.state(n) == "IDLE+CLOUD" for n in ("c1", "c2")),
                   what="resumed nodes registered")
        doc = json.loads(open(os.path.join(_power_dir(c), "last-resume.json")).read())
        assert doc["all_nodes_resume"] == fold(["c1", "c2"]) and doc["jobs"] == []
        pids = {n: int(open(os.path.join(_power_dir(c), f"{n}.pid")).read()) for n in ("c1", "c2")}
        rec = c.snapshot()["c1"]
        assert rec["last_power_action"]["action"] == "resume"
        assert rec["last_power_action"]["rc"] == 0
        # SuspendTime=2: idle -> % (suspend.sh stops the rnoded) -> ~ after SuspendTimeout.
        c.wait_for(lambda: c.snapshot()["c1"]["compact"] == "idle%", what="c1 powering down")
        c.wait_for(lambda: all(c.snapshot()[n]["compact"] == "idle~" for n in ("c1", "c2")),
                   what="both powered down")
        wait_for(lambda: not any(_alive(p) for p in pids.values()), timeout=5,
                 what="rnoded processes stopped by suspend.sh (SIGTERM not blocked)")
        rec = c.snapshot()["c2"]
        assert (rec["last_power_action"]["action"], rec["last_power_action"]["rc"]) == (
            "suspend", 0)
        assert "suspend: stopped rnoded of c1" in c.log("rctld")
        # The resume file is gone once the program ended.
        assert not [f for f in os.listdir(c.state_dir) if f.startswith("resume-")]
    finally:
        c.kill_ctld()
        c.stop()


def test_controller_sigkill_during_power_up_and_late_boot_after_resume_timeout(tmp_path) -> None:
    # This ResumeProgram boots only c1, five seconds late; c2 never comes.
    wrapper = tmp_path / "resume_slow.sh"
    wrapper.write_text(f"#!/bin/sh\ncp \"$SLURM_RESUME_FILE\" {tmp_path}/seen.json\nsleep 5\n"
                       f"exec {EXAMPLES / 'resume.sh'} c1\n")
    wrapper.chmod(0o755)
    with _cluster(tmp_path, resume=str(wrapper), suspend_time=3600, resume_timeout=16) as c:
        c.start_ctld()
        r = c.request(m.UpdateNodes("c[1-2]", "POWER_UP", None, "root"))
        assert r.ok, r.errors
        assert c.snapshot()["c1"]["compact"] == "idle#"
        # Saves are coalesced (0.5 s): kill once the `#` is on disk, 6 s into the power-up as
        # the saved power_started (wall clock) counts it.
        def saved_c2() -> dict:
            return (statefile.load(c.state_dir) or {}).get("nodes", {}).get("c2", {})

        wait_for(lambda: "POWERING_UP" in saved_c2().get("state", {}).get("flags", ()),
                 timeout=5, what="power-up on disk")
        started = saved_c2()["power_started"]
        wait_for(lambda: time.time() - started >= 6, timeout=10, what="6 s into the power-up")
        c.kill_ctld()  # SIGKILL while both are `#`
        restarted = time.time()
        c.start_ctld()
        assert c.snapshot()["c2"]["compact"] == "idle#"  # restored mid power-up
        c.wait_for(lambda: c.state("c1") == "IDLE+CLOUD", what="c1 registered after restart")
        c.wait_for(lambda: c.snapshot()["c2"]["compact"] == "down~", timeout=25,
                   what="c2 down~ at its original ResumeTimeout")
        down = time.time()
        # The original deadline is started+16; one restarted by the restart would be at
        # restarted+16 (6 s or more later): decide at the mid-point, robust to a slow machine.
        assert down >= started + 16 - 0.5
        assert down < started + 16 + (restarted - started) / 2, "ResumeTimeout restarted"
        assert c.snapshot()["c2"]["state"]["reason"]["text"] == "ResumeTimeout reached"
        wait_for(lambda: (tmp_path / "resume_failed").exists(), timeout=5,
                 what="ResumeFailProgram called")
        assert (tmp_path / "resume_failed").read_text().strip() == "c2"
        assert json.loads((tmp_path / "seen.json").read_text())["all_nodes"] == fold(["c1", "c2"])
        # c2 boots late after all: ReturnToService=1 takes it back, not `down~` forever.
        c.start_node("c2")
        c.wait_for(lambda: c.state("c2") == "IDLE+CLOUD", what="late c2 back in service")
        pid = int(open(os.path.join(_power_dir(c), "c1.pid")).read())
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not _alive(pid), timeout=5, what="c1's rnoded stopped")
