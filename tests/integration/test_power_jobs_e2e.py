"""Resume on demand with real daemons: a job sent to a powered-down partition boots its node
through examples/resume.sh (an rnoded that runs the job), runs, ends, and the node powers down
again; a node that never boots reaches ResumeTimeout: `down~`, job requeued, ResumeFailProgram."""

from __future__ import annotations

import getpass
import json
import os

from ranch.protocol import messages as m

from .cluster import wait_for
from .test_power_e2e import EXAMPLES, _cluster, _power_dir


def _submit(c, tmp_path, **kw) -> int:
    req = m.SubmitJob(script="#!/bin/sh\necho hello from job $SLURM_JOB_ID\nsleep 1\n",
                      user=getpass.getuser(), uid=os.getuid(), gid=os.getgid(),
                      workdir=str(tmp_path), partition="cloud", **kw)
    reply = c.request(req)
    assert isinstance(reply, m.SubmitReply), reply
    return reply.job_id


def _job(c, job_id: int) -> dict:
    reply = c.request(m.GetJobs((job_id,)))
    assert isinstance(reply, m.JobList), reply
    return reply.jobs[0]


def test_job_on_powered_down_partition_boots_runs_and_powers_down_again(tmp_path) -> None:
    # The example as it is: rnoded runs this test's jobs whoever runs it (DisableRootJobs=NO).
    resume = EXAMPLES / "resume.sh"
    with _cluster(tmp_path, resume=str(resume), suspend_time=2) as c:
        c.start_ctld()
        assert c.snapshot()["c1"]["compact"] == "idle~"
        job_id = _submit(c, tmp_path)
        assert _job(c, job_id)["state"] == "CONFIGURING"
        c.wait_for(lambda: _job(c, job_id)["state"] == "RUNNING", what="job running")
        assert _job(c, job_id)["nodes"] == "c1"
        # The node was allocated powered down, then booted: alloc~ -> alloc# in the record.
        assert ("old=IDLE+CLOUD+POWERED_DOWN new=ALLOCATED+CLOUD+NOT_RESPONDING+POWERING_UP"
                in c.log("rctld"))
        doc = json.loads(open(os.path.join(_power_dir(c), "last-resume.json")).read())
        assert doc["all_nodes_resume"] == "c1"
        assert [(j["job_id"], j["nodes_alloc"], j["nodes_resume"], j["nodes"])
                for j in doc["jobs"]] == [(job_id, "c1", "c1", "c1")]
        assert doc["jobs"][0]["partition"] == "cloud"
        c.wait_for(lambda: _job(c, job_id)["state"] == "COMPLETED", what="job done")
        out = tmp_path / f"slurm-{job_id}.out"
        assert f"hello from job {job_id}" in out.read_text()
        c.wait_for(lambda: c.snapshot()["c1"]["compact"] == "idle~", timeout=20,
                   what="c1 powered down again")
        assert c.snapshot()["c2"]["compact"] == "idle~"  # never needed, never booted
        assert c.snapshot()["c1"]["last_power_action"]["action"] == "suspend"


def test_resume_timeout_downs_the_node_requeues_the_job_and_calls_resume_fail(tmp_path) -> None:
    never = tmp_path / "resume_never.sh"
    never.write_text("#!/bin/sh\necho \"not booting $1\"\n")
    never.chmod(0o755)
    with _cluster(tmp_path, resume=str(never), resume_timeout=3) as c:
        c.start_ctld()
        job_id = _submit(c, tmp_path, nodelist="c1")
        assert _job(c, job_id)["state"] == "CONFIGURING"
        assert c.snapshot()["c1"]["compact"] == "alloc#"
        c.wait_for(lambda: c.snapshot()["c1"]["compact"] == "down~", what="c1 down~")
        rec = c.snapshot()["c1"]
        assert rec["state"]["reason"]["text"] == "ResumeTimeout reached"
        job = c.wait_for(lambda: (j := _job(c, job_id))["state"] == "PENDING" and j,
                         what="job requeued")
        assert job["restarts"] >= 1
        wait_for(lambda: (tmp_path / "resume_failed").exists(), timeout=5,
                 what="ResumeFailProgram called")
        assert (tmp_path / "resume_failed").read_text().split() == ["c1"]
