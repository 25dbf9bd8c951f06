"""Membership in-process (MockClock): NodeApproval, NodeApprovalAuto, reject, dynamic nodes,
delete, and what survives a restart of the controller's state."""

from __future__ import annotations

import orjson
import pytest

from ranch.ctld.state import deferred
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import FakeConn, beat, hardware, job, make_config, state, wall

MANUAL = "NodeApproval=manual\nNodeApprovalAuto=n4"
DYNAMIC = """\
ClusterName=test
HeartbeatInterval=10
SlurmdTimeout=60
MaxNodeCount=6
{extra}
NodeName=n[1-2] CPUs=4 RealMemory=1000
PartitionName=main Nodes=ALL Default=YES
PartitionName=gpu Nodes=n1,dyn[1-3]
PartitionName=small Nodes=n2
"""


def _cluster(cfg) -> Cluster:
    c = Cluster(cfg, wall=wall)
    c.start()
    return c


def _register(c: Cluster, name: str, *, dynamic: bool = False, conf: str = "",
              cpus: int = 4) -> tuple[m.RegisterReply, FakeConn]:
    conn = FakeConn()
    msg = m.Register(name, hardware(cpus=cpus), 1.0, "0.1.0", dynamic=dynamic, dynamic_conf=conf)
    return c.register(msg, conn), conn


def _act(c: Cluster, action: str, nodes: str, reason: str | None = None) -> m.UpdateResult:

    return c.membership.handle(m.NodeMembership(action, nodes, reason, "alice"))


def _kinds(c: Cluster, node: str) -> list[str]:
    return [e["kind"] for e in c.eventlog.query(nodes=[node])]


def _restart(c: Cluster, cfg) -> Cluster:
    """A new controller from the saved document (as a restart reads the state file)."""
    doc = orjson.loads(deferred.dumps(c.save_doc()))
    new = Cluster(cfg, wall=wall)
    new.restore(doc)
    new.start()
    return new


async def test_manual_approval_holds_new_nodes_until_approved(autojump_clock) -> None:
    c = _cluster(make_config(extra=MANUAL))
    assert state(c, "n1") == "UNKNOWN+PENDING"
    assert state(c, "n4") == "UNKNOWN"  # NodeApprovalAuto: pre-approved
    reply, conn = _register(c, "n1")
    assert reply.accepted and reply.node_state == "IDLE+PENDING"
    node = c.nodes["n1"]
    assert not node.state.schedulable
    rec = c.snapshot().nodes[0]
    assert (rec["compact"], rec["state"]["flags"]) == ("pend", ["PENDING"])
    assert rec["last_change"] is not None
    # Heartbeats are taken while pending: a missed one marks it, the next clears it.
    assert isinstance(beat(c, "n1", conn, 1), m.HeartbeatReply)
    # No work lands on a pending node: a job asking for it waits, and is cancelled here.
    waiting = c.jobs.submit(job(nodelist="n1", cpus_per_task=2)).job_id
    assert c.jobs.record(c.jobs.jobs[waiting])["reason"] == "ReqNodeNotAvail, UnavailableNodes:n1"
    assert state(c, "n1") == "IDLE+PENDING" and not conn.pushed
    assert c.jobs.cancel(m.CancelJobs((waiting,), "alice", 1000)).ok
    # Admin updates are refused with the hint to approve first.
    r = c.update_nodes(m.UpdateNodes("n1", "DRAIN", "x", "bob"))
    assert not r.ok and "rcontrol approve" in r.errors[0]
    r = _act(c, "approve", "n1")
    assert r.ok and r.changed == ("n1",)
    assert state(c, "n1") == "IDLE" and c.nodes["n1"].state.schedulable
    assert _kinds(c, "n1")[-2:] == ["state", "approved"]
    approved = c.eventlog.query(nodes=["n1"])[-2]
    assert (approved["old"], approved["new"], approved["user"]) == ("IDLE+PENDING", "IDLE",
                                                                    "alice")
    # Approving again is a no-op; an approved node survives a restart without approval.
    assert _act(c, "approve", "n1").ok
    c2 = _restart(c, make_config(extra=MANUAL))
    assert state(c2, "n1") == "IDLE" and state(c2, "n2") == "UNKNOWN+PENDING"


async def test_pre_approved_node_joins_by_itself(autojump_clock) -> None:
    c = _cluster(make_config(extra=MANUAL))
    reply, _ = _register(c, "n4")
    assert reply.accepted and state(c, "n4") == "IDLE"


async def test_reject_needs_a_reason_refuses_registrations_and_persists(autojump_clock) -> None:
    cfg = make_config(extra=MANUAL)
    c = _cluster(cfg)
    _, conn = _register(c, "n2")
    r = _act(c, "reject", "n2")
    assert not r.ok and "reason is required" in r.errors[0]
    r = _act(c, "reject", "n2", "unknown machine")
    assert r.ok, r.errors
    assert conn.closed  # evicted
    assert state(c, "n2") == "DOWN+REJECTED"
    assert c.snapshot().nodes[1]["compact"] == "rej"
    reply, _ = _register(c, "n2")
    assert not reply.accepted
    assert "rejected by alice: unknown machine" in reply.reason
    assert _kinds(c, "n2")[-1] == "refused"
    # A member cannot be rejected (only a waiting node), and the message says what to do.
    _register(c, "n4")
    r = _act(c, "reject", "n4", "x")
    assert not r.ok and "already a member" in r.errors[0]
    # Across a controller restart the rejection holds.
    c2 = _restart(c, cfg)
    assert state(c2, "n2") == "DOWN+REJECTED"
    reply, _ = _register(c2, "n2")
    assert not reply.accepted and "unknown machine" in reply.reason
    # Approving a rejected node lets it register again.
    assert _act(c2, "approve", "n2").ok
    reply, _ = _register(c2, "n2")
    assert reply.accepted and state(c2, "n2") == "IDLE"


async def test_unknown_node_without_dynamic_is_refused_with_a_hint(autojump_clock) -> None:
    c = _cluster(parse(DYNAMIC))
    reply, _ = _register(c, "stranger")
    assert not reply.accepted and "--dynamic" in reply.reason
    c_off = _cluster(make_config())
    reply, _ = _register(c_off, "stranger", dynamic=True)
    assert not reply.accepted and "MaxNodeCount" in reply.reason


def parse(text: str, extra: str = ""):
    from ranch.conf.build import parse_config_text

    return parse_config_text(text.format(extra=extra), path="/d.conf")


async def test_dynamic_node_joins_runs_is_deleted_and_rejoins(autojump_clock) -> None:
    cfg = parse(DYNAMIC)
    c = _cluster(cfg)
    reply, conn = _register(c, "dyn1", dynamic=True, conf='Features=fast,ib Weight=7', cpus=8)
    assert reply.accepted, reply.reason
    node = c.nodes["dyn1"]
    assert (node.cfg.cpus, node.cfg.features, node.cfg.weight) == (8, ("fast", "ib"), 7)
    assert node.cfg.gres_str == "gpu:2"  # from the reported hardware
    assert node.partitions == ("main", "gpu")
    snap = c.snapshot()
    rec = next(r for r in snap.nodes if r["name"] == "dyn1")
    assert rec["dynamic"] and rec["complete"] == "IDLE"
    parts = {p["name"]: p["nodes"] for p in snap.partitions}
    assert "dyn1" in parts["main"] and "dyn1" in parts["gpu"] and "dyn1" not in parts["small"]
    assert "joined" in _kinds(c, "dyn1")
    # It runs work: delete is refused while a job holds its CPUs.
    big = c.jobs.submit(job(nodelist="dyn1", cpus_per_task=4))
    assert isinstance(big, m.SubmitReply) and state(c, "dyn1") == "MIXED"
    beat(c, "dyn1", conn, 1, job_ids=(big.job_id,))
    r = _act(c, "delete", "dyn1")
    assert not r.ok and f"runs job(s) {big.job_id};" in r.errors[0]
    beat(c, "dyn1", conn, 2, job_ids=(),
         jobs_ended=(m.JobEnd(big.job_id, "COMPLETED", exit_code=0),))
    assert c.jobs.uses.get("dyn1") is None or not c.jobs.uses["dyn1"].jobs
    assert state(c, "dyn1") == "IDLE"
    # Saved and restored with the state, like any node.
    c = _restart(c, cfg)
    assert c.nodes["dyn1"].cfg.features == ("fast", "ib")
    assert "dyn1" in {p["name"]: p["nodes"] for p in c.snapshot().partitions}["main"]
    _, conn = _register(c, "dyn1", dynamic=True, conf='Features=fast,ib Weight=7', cpus=8)
    # Config nodes cannot be deleted.
    r = _act(c, "delete", "n1")
    assert not r.ok and "NodeName line" in r.errors[0]
    assert _act(c, "delete", "dyn1").ok
    assert "dyn1" not in c.nodes and conn.closed
    assert all("dyn1" not in p["nodes"] for p in c.snapshot().partitions)
    assert "dyn1" not in orjson.loads(deferred.dumps(c.save_doc()))["nodes"]
    assert _kinds(c, "dyn1")[-1] == "deleted"
    # It may register again later.
    reply, _ = _register(c, "dyn1", dynamic=True)
    assert reply.accepted and state(c, "dyn1") == "IDLE"


async def test_dynamic_nodes_respect_max_node_count_conf_errors_and_approval(
    autojump_clock,
) -> None:
    c = _cluster(parse(DYNAMIC, "NodeApproval=manual\nNodeApprovalAuto=dyn2"))
    reply, _ = _register(c, "dyn9", dynamic=True, conf="Feature=x Bogus=1")
    assert not reply.accepted and "Bogus" in reply.reason
    assert _register(c, "dyn1", dynamic=True)[0].accepted
    assert state(c, "dyn1") == "IDLE+PENDING"  # manual approval applies to dynamic nodes
    assert _register(c, "dyn2", dynamic=True)[0].accepted
    assert state(c, "dyn2") == "IDLE"  # pre-approved
    assert _register(c, "dyn3", dynamic=True)[0].accepted
    assert _register(c, "dyn4", dynamic=True)[0].accepted  # 6 nodes now
    reply, _ = _register(c, "dyn5", dynamic=True)
    assert not reply.accepted and "MaxNodeCount=6 reached" in reply.reason


async def test_reconfigure_keeps_dynamic_nodes(autojump_clock) -> None:
    cfg = parse(DYNAMIC)
    c = _cluster(cfg)
    assert _register(c, "dyn1", dynamic=True)[0].accepted
    c.apply_config(parse(DYNAMIC, "# reconfigured"))
    assert "dyn1" in c.nodes and c.nodes["dyn1"].dynamic_conf == ""
    assert "dyn1" in {p["name"]: p["nodes"] for p in c.snapshot().partitions}["main"]
    # A NodeName line for it makes it an ordinary node (no longer deletable).
    c.apply_config(parse(DYNAMIC.replace("NodeName=n[1-2]", "NodeName=n[1-2],dyn1")))
    assert c.nodes["dyn1"].dynamic_conf is None
    r = _act(c, "delete", "dyn1")
    assert not r.ok and "NodeName line" in r.errors[0]


@pytest.mark.parametrize("action", ["approve", "fly"])
async def test_bad_membership_requests_name_the_problem(autojump_clock, action) -> None:
    c = _cluster(make_config())
    if action == "fly":
        r = _act(c, "fly", "n1")
        assert not r.ok and "'fly'" in r.errors[0]
    else:
        r = _act(c, "approve", "zz[1-2]")
        assert not r.ok and "unknown node" in r.errors[0]
