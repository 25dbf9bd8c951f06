"""Issue 19's hijack attempt with real daemons: a second rnoded holding the cluster key registers
under a live node's name. It is refused and recorded, the live node keeps its job; the node's
credential survives a controller restart; a rebuilt machine gets in after `rcontrol approve`."""

from __future__ import annotations

import shutil
import stat

from ranch.protocol import messages as m
from tests.integration.cluster import Cluster


def _job_state(c: Cluster, jid: int) -> str:
    reply = c.request(m.GetJobs((jid,)))
    return next(j["state"] for j in reply.jobs if j["job_id"] == jid)


def _refusals(c: Cluster, node: str) -> list[dict]:
    reply = c.request(m.GetEvents(nodes=node))
    return [e for e in reply.events if e["kind"] == "refused"]


def test_a_second_rnoded_under_a_live_name_is_refused_and_changes_nothing(tmp_path) -> None:
    with Cluster(tmp_path, ["n1", "n2"]) as c:
        c.start()
        cred = tmp_path / "spool" / "n2" / "node.credential"
        c.wait_for(cred.exists, what="n2's credential in its spool")
        assert stat.S_IMODE(cred.stat().st_mode) == 0o600
        done = c.run_cli("ranch.cli.rbatch", "-w", "n2", "-D", str(tmp_path), "--wrap", "sleep 300")
        assert done.returncode == 0, done.stderr
        jid = int(done.stdout.split()[-1])
        c.wait_for(lambda: _job_state(c, jid) == "RUNNING", what="the job on n2")
        before = c.snapshot()["n2"]

        # the hijack: same key, same name, its own (empty) spool
        c.nodes["thief"] = c._spawn("thief", [
            "-m", "ranch.noded", "--server", f"127.0.0.1:{c.port}", "--name", "n2",
            "--spool-dir", str(tmp_path / "spool" / "thief")])
        c.wait_for(lambda: _refusals(c, "n2"), what="the refusal in the event log")
        refusal = _refusals(c, "n2")[0]
        assert "rcontrol approve NodeName=n2" in refusal["reason"]
        assert refusal["credential"] == "missing"
        assert "registration refused: wrong node credential" in c.log("rctld")

        after = c.snapshot()["n2"]
        assert after["complete"] == before["complete"] == "ALLOCATED"
        assert after.get("boot_time") == before.get("boot_time")
        assert _job_state(c, jid) == "RUNNING", "the live node kept its job"
        c.kill_node("thief")
        assert not (tmp_path / "spool" / "thief" / "node.credential").exists()

        # the hashes are in the saved state: a restarted controller still knows n2's
        c.stop_ctld()
        c.start_ctld()
        c.wait_for(lambda: "node registered node=n2" in c.log("rctld").split("starting")[-1],
                   what="n2 registered again with its credential")
        assert c.state("n2") == "ALLOCATED" and _job_state(c, jid) == "RUNNING"

        # n2 is rebuilt: its spool (and credential) is gone; an admin lets it in again
        c.request(m.CancelJobs((jid,), user="root", uid=0))
        c.wait_for(lambda: c.state("n2") == "IDLE", what="n2 idle again")
        c.kill_node("n2")
        shutil.rmtree(tmp_path / "spool" / "n2")
        count = len(_refusals(c, "n2"))
        c.start_node("n2")
        c.wait_for(lambda: len(_refusals(c, "n2")) > count, what="the rebuilt n2 refused")
        reply = c.request(m.NodeMembership("approve", "n2", user="root"))
        assert isinstance(reply, m.UpdateResult) and reply.ok, reply
        c.wait_for(lambda: c.state("n2") == "IDLE", timeout=30, what="the rebuilt n2 back")
        c.wait_for(cred.exists, what="a new credential")
