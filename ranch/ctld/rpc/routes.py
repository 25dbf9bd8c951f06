"""What rctld answers to each request, as one table: message type -> handler, and whether the
reply may confirm a change (such a reply waits until the change is on disk: Durability.durable).

A handler takes (connection, message) and returns the reply, an awaitable of it, or None for no
reply. Each route group is built from the ports it uses (ctld/rpc/rpcports.py): node traffic,
admin on nodes, reads, the job store's services; the server (ctld/rpc/server.py) builds the
table once and looks a message's type up in it; nothing else dispatches.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs

from ranch.ctld import logs
from ranch.ctld.rpc import eventstream, nodeident, permissions
from ranch.ctld.rpc.wire import Prebuilt
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from ranch.conf.model import ClusterConfig
    from ranch.ctld.nodes.node import NodeRecord
    from ranch.ctld.rpc.connection import Connection
    from ranch.ctld.rpc.nodecredentials import NodeCredentials
    from ranch.ctld.rpc.rpcports import EventFeed, JobServices, NodeAdmin, Reads, Traffic

Table = dict[type, "Route"]


@attrs.frozen
class Route:
    handler: Callable[[Connection, Any], Any]
    changes: bool = True  # its reply may confirm a change: it waits for the journal


# -- node traffic ---------------------------------------------------------------------------------


def heartbeat(traffic: Traffic, book: NodeCredentials, conn: Connection,
              msg: m.Heartbeat) -> Any:
    if conn.node is not None:
        book.confirm(conn.node)  # it has kept its credential (nodeident.py)
    return traffic.heartbeat(msg, conn)


def register(traffic: Traffic, book: NodeCredentials, nodes: Mapping[str, NodeRecord],
             log: EventFeed, conn: Connection, msg: m.Register) -> Any:
    # the node's own credential (ctld/rpc/nodeident.py)
    refused = nodeident.refusal(book, nodes, log, conn, msg)
    if refused is not None:
        return refused
    return nodeident.issue(book, log, msg, traffic.register(msg, conn, version=conn.version))


def shutdown_notice(traffic: Traffic, conn: Connection, msg: m.ShutdownNotice) -> Any:
    return traffic.shutdown_notice(msg, conn)


def job_started(traffic: Traffic, conn: Connection, msg: m.JobStarted) -> Any:
    reply = traffic.job_started(msg, conn)
    return None if msg.answers_launch else reply  # LaunchJob's answer: the node awaits nothing


def ack(conn: Connection, msg: m.Ack) -> None:
    return None  # a node acknowledging a push


def node_error(conn: Connection, msg: m.Error) -> Any:
    if conn.node is None:
        return m.Error("bad_request", "Error is not a request rctld serves")
    # a node refusing a push (LaunchJob: launch_failed; its JobEnd follows)
    logs.event("node refused a push", logging.WARNING, node=conn.node, code=msg.code,
               error=msg.message)
    return None


def node_routes(traffic: Traffic, book: NodeCredentials, nodes: Mapping[str, NodeRecord],
                log: EventFeed) -> Table:
    """What node daemons send (`book`: each node's credential, ctld/rpc/nodeident.py)."""
    return {
        m.Heartbeat: Route(partial(heartbeat, traffic, book)),
        m.Register: Route(partial(register, traffic, book, nodes, log)),
        m.ShutdownNotice: Route(partial(shutdown_notice, traffic)),
        m.JobStarted: Route(partial(job_started, traffic)),
        m.Ack: Route(ack, changes=False),
        m.Error: Route(node_error, changes=False),
    }


# -- admin on nodes ------------------------------------------------------------------------------


def admin_routes(admin: NodeAdmin, book: NodeCredentials, log: EventFeed,
                 reconfigure: Callable[[str], Awaitable[m.ReconfigureResult]],
                 takeover: Callable[[str], Any]) -> Table:
    """rcontrol's changes: nodes, reboots, windows, membership, guards, reconfigure, takeover."""
    return {
        m.UpdateNodes: Route(lambda conn, msg: admin.update_nodes(msg)),
        m.RebootNodes: Route(lambda conn, msg: admin.reboot_nodes(msg)),
        m.ReservationRequest: Route(lambda conn, msg: admin.reservation(msg)),
        # approve|delete also forget the node's credential (ctld/rpc/nodeident.py)
        m.NodeMembership: Route(lambda conn, msg: nodeident.membership(
            book, log, admin.node_membership, msg)),
        # rcontrol show guards | confirm down|drain | reset guard (ctld/nodes/guards.py)
        m.GuardRequest: Route(lambda conn, msg: admin.guard_request(msg)),
        m.Reconfigure: Route(lambda conn, msg: reconfigure(msg.user or conn.peer)),
        m.Takeover: Route(lambda conn, msg: takeover(msg.user or conn.peer), changes=False),
    }


# -- the accounting tree ------------------------------------------------------------------------


AcctmgrAnswer = Callable[[m.AcctmgrRequest, str, int], m.AcctmgrReply]


def acctmgr(answer: AcctmgrAnswer, conn: Connection, msg: m.AcctmgrRequest) -> Any:
    """racctmgr: the caller is the connection's (permissions.gate put a user's own name and
    uid in); the cluster's admins and the key's holder act as slurmdbd's SlurmUser ("root"),
    everybody else by the AdminLevel the tree gives them (assoc/ops.py may)."""
    who = conn.who
    caller = "root" if who is None or who.admin else msg.user
    return answer(msg, caller, msg.uid if who is None else who.uid)


def accounting_routes(answer: AcctmgrAnswer,
                      shares: Callable[[str], m.ShareReply] | None = None) -> Table:
    """racctmgr (sacctmgr) over the accounting tree (ctld/accounts/): a reply that confirms a
    change waits for the journal; rshare (sshare) reads its fair-share rows (cut to the user
    permissions.gate wrote in under PrivateData=usage)."""
    table: Table = {m.AcctmgrRequest: Route(partial(acctmgr, answer))}
    if shares is not None:
        table[m.ShareRequest] = Route(lambda conn, msg: shares(msg.user), changes=False)
    return table


# -- reads ---------------------------------------------------------------------------------------


def credential(conn: Connection, msg: m.Credential) -> Any:
    """A user's connection opens with one (ctld/rpc/userauth.py has already taken it in)."""
    if conn.who is None:
        return m.Error("bad_request", "a Credential must be the first frame of a connection "
                       "and signed with the key it carries")
    return None


def read_routes(reads: Reads, log: EventFeed) -> Table:
    """rinfo, rcontrol show config, ping, rdiag, rcontrol events (the backlog; --follow is a stream:
    ctld/rpc/reading.py hands it to ctld/rpc/eventstream.py)."""
    return {
        m.GetSnapshot: Route(lambda conn, msg: Prebuilt("Snapshot", reads.snapshot_body(
            metrics=msg.metrics, fields=msg.fields)), changes=False),
        m.Ping: Route(lambda conn, msg: reads.ping(), changes=False),
        m.GetDiag: Route(lambda conn, msg: m.Diag(reads.diag()), changes=False),
        m.Credential: Route(credential, changes=False),
        m.GetConfig: Route(lambda conn, msg: reads.config_in_force(), changes=False),
        m.GetEvents: Route(lambda conn, msg: eventstream.backlog(log, msg), changes=False),
    }


# -- the job store's services --------------------------------------------------------------------


def jobs_listing(jobs: JobServices, conn: Connection, msg: m.GetJobs) -> Any:
    if msg.fields and not msg.job_ids:  # rqueue's view: only the keys it reads (issue 23)
        return Prebuilt("JobList", jobs.listing.list_fields(msg.fields))
    return Prebuilt("JobList", jobs.listing.list_body(msg.job_ids))


async def acct_query(jobs: JobServices, conn: Connection, msg: m.GetAcct) -> Any:
    """racct: the jobs held and the finished-job history (ctld/jobs/acct.py)."""
    return Prebuilt("AcctList", await jobs.accounting.query(msg))


def submit(jobs: JobServices, durable: Callable[[m.SubmitJob], Any] | None,
           conn: Connection, msg: m.SubmitJob) -> Any:
    if msg.test_only:  # sbatch --test-only: nothing is made (ctld/jobs/willrun.py)
        return jobs.will_run.answer(msg)
    return durable(msg) if durable else jobs.submission.submit(msg)


def cancel(jobs: JobServices, config: Callable[[], ClusterConfig], conn: Connection,
           msg: m.CancelJobs) -> Any:
    return jobs.commands.cancel(msg, permissions.acting(config(), conn.who, msg.uid, msg.user))


def job_control(jobs: JobServices, config: Callable[[], ClusterConfig], conn: Connection,
                msg: m.JobControl) -> Any:
    return jobs.commands.control(msg, permissions.acting(config(), conn.who, msg.uid, msg.user))


def step_request(jobs: JobServices, conn: Connection, msg: m.StepRequest) -> Any:
    """rrun: a step inside a running job (ctld/jobs/steps.py); the caller's own identity decides."""
    return jobs.steps.request(msg, conn.who or permissions.KEY_HOLDER)


def job_routes(jobs: JobServices, config: Callable[[], ClusterConfig],
               durable: Callable[[m.SubmitJob], Any] | None) -> Table:
    """rbatch, rcancel, rcontrol hold|release|..., rqueue, racct, rrun's steps. `durable`:
    Durability.submit_now, whose reply leaves once the journal holds the job (None: tests of
    the core)."""
    return {
        m.GetJobs: Route(partial(jobs_listing, jobs), changes=False),
        m.GetAcct: Route(partial(acct_query, jobs), changes=False),
        # Durability.submit_now's reply is Journaled: it waits for the journal itself (and
        # the jobs are retracted if the write fails), whatever else the request changed
        m.SubmitJob: Route(partial(submit, jobs, durable), changes=False),
        m.CancelJobs: Route(partial(cancel, jobs, config)),
        m.JobControl: Route(partial(job_control, jobs, config)),
        m.StepRequest: Route(partial(step_request, jobs)),
        m.StepEnd: Route(lambda conn, msg: jobs.steps.node_ended(conn.node, msg)),
        m.GetWhy: Route(lambda conn, msg: jobs.why.answer(msg), changes=False),  # rqueue --why
        m.PriorityRequest: Route(lambda conn, msg: jobs.priorities.reply(msg, conn.who),
                                 changes=False),  # rsprio (issue 44)
        # rcontrol reconfigure --dry-run (issue 44): admins only (rpc/permissions.py)
        m.ReconfigureDryRun: Route(lambda conn, msg: jobs.dry_runs.answer(msg), changes=False),
    }
