"""What rctld answers to each request, as one table: message type -> handler, and whether the
reply may confirm a change (such a reply waits until the change is on disk: Durability.durable).

A handler takes (server, connection, message) and returns the reply, an awaitable of it, or None
for no reply. The server looks a message's type up here once; nothing else dispatches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from ranch.ctld import logs
from ranch.ctld.rpc import eventstream, nodeident, permissions
from ranch.ctld.rpc.wire import Prebuilt
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from ranch.ctld.rpc.rpcports import Peer, Rpc


@attrs.frozen
class Route:
    handler: Callable[[Rpc, Peer, Any], Any]
    changes: bool = True  # its reply may confirm a change: it waits for the journal


def heartbeat(s: Rpc, conn: Peer, msg: m.Heartbeat) -> Any:
    if conn.node is not None:
        s.node_credentials.confirm(conn.node)  # it has kept its credential (nodeident.py)
    return s.cluster.heartbeat(msg, conn)


def register(s: Rpc, conn: Peer, msg: m.Register) -> Any:
    refused = nodeident.refusal(s, conn, msg)  # the node's own credential (ctld/rpc/nodeident.py)
    if refused is not None:
        return refused
    return nodeident.issue(s, msg, s.cluster.register(msg, conn, version=conn.version))


def snapshot(s: Rpc, conn: Peer, msg: m.GetSnapshot) -> Any:
    return Prebuilt("Snapshot", s.cluster.snapshot_body(metrics=msg.metrics, fields=msg.fields))


def update_nodes(s: Rpc, conn: Peer, msg: m.UpdateNodes) -> Any:
    return s.cluster.update_nodes(msg)


def reboot_nodes(s: Rpc, conn: Peer, msg: m.RebootNodes) -> Any:
    return s.cluster.reboot_nodes(msg)


def reservation(s: Rpc, conn: Peer, msg: m.ReservationRequest) -> Any:
    return s.cluster.reservation(msg)


def shutdown_notice(s: Rpc, conn: Peer, msg: m.ShutdownNotice) -> Any:
    return s.cluster.shutdown_notice(msg, conn)


def ping(s: Rpc, conn: Peer, msg: m.Ping) -> Any:
    return s.cluster.ping()


def node_membership(s: Rpc, conn: Peer, msg: m.NodeMembership) -> Any:
    return nodeident.membership(s, msg)


def events_backlog(s: Rpc, conn: Peer, msg: m.GetEvents) -> Any:
    return eventstream.backlog(s.cluster, msg)


def config(s: Rpc, conn: Peer, msg: m.GetConfig) -> Any:
    return s.cluster.config_in_force()


def reconfigure(s: Rpc, conn: Peer, msg: m.Reconfigure) -> Any:
    return s.reconfigure(msg.user or conn.peer)


def takeover(s: Rpc, conn: Peer, msg: m.Takeover) -> Any:
    return s.takeover(msg.user or conn.peer)


def job_started(s: Rpc, conn: Peer, msg: m.JobStarted) -> Any:
    return s.cluster.job_started(msg, conn)


def ack(s: Rpc, conn: Peer, msg: m.Ack) -> None:
    return None  # a node acknowledging a push


def jobs(s: Rpc, conn: Peer, msg: m.GetJobs) -> Any:
    if msg.fields and not msg.job_ids:  # rqueue's view: only the keys it reads (issue 23)
        return Prebuilt("JobList", s.cluster.jobs.listing.list_fields(msg.fields))
    return Prebuilt("JobList", s.cluster.jobs.listing.list_body(msg.job_ids))


async def acct_query(s: Rpc, conn: Peer, msg: m.GetAcct) -> Any:
    """racct: the jobs held and the finished-job history (ctld/jobs/acct.py)."""
    return Prebuilt("AcctList", await s.cluster.jobs.accounting.query(msg))


def submit(s: Rpc, conn: Peer, msg: m.SubmitJob) -> Any:
    if msg.test_only:  # sbatch --test-only: nothing is made (ctld/jobs/willrun.py)
        return s.cluster.jobs.will_run.answer(msg)
    return s.submit(msg) if s.submit else s.cluster.jobs.submission.submit(msg)


def cancel(s: Rpc, conn: Peer, msg: m.CancelJobs) -> Any:
    return s.cluster.jobs.commands.cancel(msg, permissions.acting(s.cluster.config, conn.who,
                                                                  msg.uid, msg.user))


def job_control(s: Rpc, conn: Peer, msg: m.JobControl) -> Any:
    return s.cluster.jobs.commands.control(msg, permissions.acting(s.cluster.config, conn.who,
                                                                   msg.uid, msg.user))


def step_request(s: Rpc, conn: Peer, msg: m.StepRequest) -> Any:
    """rrun: a step inside a running job (ctld/jobs/steps.py); the caller's own identity decides."""
    return s.cluster.jobs.steps.request(msg, conn.who or permissions.KEY_HOLDER)


def step_end(s: Rpc, conn: Peer, msg: m.StepEnd) -> Any:
    return s.cluster.jobs.steps.node_ended(conn.node, msg)


def guard_request(s: Rpc, conn: Peer, msg: m.GuardRequest) -> Any:
    """rcontrol show guards | confirm down|drain | reset guard (ctld/nodes/guards.py)."""
    return s.cluster.guard_request(msg)


def node_error(s: Rpc, conn: Peer, msg: m.Error) -> Any:
    if conn.node is None:
        return m.Error("bad_request", "Error is not a request rctld serves")
    # a node refusing a push (LaunchJob: launch_failed; its JobEnd follows)
    logs.event("node refused a push", logging.WARNING, node=conn.node, code=msg.code,
               error=msg.message)
    return None


def credential(s: Rpc, conn: Peer, msg: m.Credential) -> Any:
    """A user's connection opens with one (ctld/rpc/userauth.py has already taken it in)."""
    if conn.who is None:
        return m.Error("bad_request", "a Credential must be the first frame of a connection "
                       "and signed with the key it carries")
    return None


# fmt: off
ROUTES: dict[type, Route] = {
    m.Heartbeat:      Route(heartbeat),
    m.Register:       Route(register),
    m.ShutdownNotice: Route(shutdown_notice),
    m.JobStarted:     Route(job_started),
    m.Ack:            Route(ack, changes=False),
    m.Error:          Route(node_error, changes=False),
    m.GetSnapshot:    Route(snapshot, changes=False),
    m.Ping:           Route(ping, changes=False),
    m.Credential:     Route(credential, changes=False),
    m.GetConfig:      Route(config, changes=False),
    m.GetEvents:      Route(events_backlog, changes=False),
    m.GetJobs:        Route(jobs, changes=False),
    m.GetAcct:        Route(acct_query, changes=False),
    m.UpdateNodes:    Route(update_nodes),
    m.RebootNodes:    Route(reboot_nodes),
    m.ReservationRequest: Route(reservation),
    m.NodeMembership: Route(node_membership),
    m.Reconfigure:    Route(reconfigure),
    m.Takeover:       Route(takeover, changes=False),
    # Durability.submit journals the jobs itself before it answers (and retracts
    # them if it cannot): a second wait would only add the next write of others' changes
    m.SubmitJob:      Route(submit, changes=False),
    m.CancelJobs:     Route(cancel),
    m.JobControl:     Route(job_control),
    m.GuardRequest:   Route(guard_request),
    m.StepRequest:    Route(step_request),
    m.StepEnd:        Route(step_end),
}
# fmt: on
