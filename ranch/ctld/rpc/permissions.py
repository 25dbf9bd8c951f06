"""Who may do what (issue 19): Slurm's rules, each written once, applied to every request before
its route runs (Dispatcher, ctld/rpc/dispatch.py, calls `gate`).

Three kinds of caller:
- the cluster key's holder (a connection signed with it: rnoded, and root on a host that holds
  the 0600 key file): trusted as Slurm trusts the munge key's holder, who can mint any user's
  credential. Its requests say which user they act for, and that is taken as said.
- a user proven by MUNGE (AuthType=auth/munge): the uid and gid munged vouched for, never those
  written in the request.
- among those, admins: root, SlurmUser, and AdminUsers (names or %group). Slurm keeps operators
  and administrators (AdminLevel) in slurmdbd; Ranch has no database, so one config key names
  them, with one level: they change nodes, reconfigure, approve/reject/delete, and act on
  anybody's jobs.

Every user submits, lists, and cancels, holds, releases, requeues or updates their own jobs.
PrivateData=jobs hides other users' jobs from users who are not admins; PrivateData=nodes (or
events) refuses them node information and the event log; PrivateData=usage is for the
accounting views (`may_see_usage`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import orjson

from ranch.conf.model import ClusterConfig
from ranch.ctld import logs
from ranch.ctld.rights import (
    ADMINS,
    DENIED,
    KEY_HOLDER,
    Identity,
    acting,
    denied,
    identify,
    identify_name,
    is_admin,
    may_act_on,
    may_see_usage,
    user_name,
)
from ranch.ctld.rpc.wire import Prebuilt
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from ranch.ctld.rpc.connection import Connection

T = TypeVar("T")  # what a listing holds: a job's record, or the web layer's piece of one

__all__ = ["ADMINS", "DENIED", "KEY_HOLDER", "Identity", "acting", "denied", "gate", "identify",
           "identify_name", "is_admin", "may_act_on", "may_see_usage", "user_name"]

# Requests only node daemons send (they hold the cluster key); a user may not pose as a node.
DAEMON_ONLY = (m.Heartbeat, m.Register, m.ShutdownNotice, m.JobStarted, m.Ack, m.Error,
               m.StepEnd)


After = Callable[[Any], Any]


def gate(config: ClusterConfig, conn: Connection, msg: Any) -> tuple[Any, Any, After | None]:
    """(the request as its route must see it, a refusal or None, a filter for the reply or
    None), under `config` (the one in force). A user's own identity replaces whatever the
    request says."""
    who: Identity | None = conn.who
    if who is None:  # the cluster key's holder
        if type(msg) is m.SubmitJob:
            return msg, root_job_refusal(config, msg), None
        return msg, None, None
    kind = type(msg)
    if kind in DAEMON_ONLY:
        return msg, _refuse(conn, who, kind.__name__, "only node daemons, which hold the "
                                                      "cluster key, send it"), None
    if kind is m.SubmitJob:
        msg = attrs.evolve(msg, user=who.name, uid=who.uid, gid=who.gid)
        return msg, root_job_refusal(config, msg) or nice_refusal(who, msg), None
    if kind is m.AcctmgrRequest:  # racctmgr: reads by anybody; the tree's rules decide changes
        return attrs.evolve(msg, user=who.name, uid=who.uid), None, None
    if kind in (m.CancelJobs, m.JobControl):
        # the caller's own name and uid, whatever the request said (the route hands the job
        # commands the caller's Identity, `acting`, whose rights decide)
        return attrs.evolve(msg, user=who.name, uid=who.uid), None, None
    read = _private_read(config, conn, who, msg)
    if read is not None:
        return read
    if kind is m.GuardRequest and msg.action.lower() == "show":
        return msg, None, None
    if kind is m.ReservationRequest:
        if msg.action.lower() != "show" and not who.admin:
            return msg, _refuse(conn, who, f"{msg.action} reservation",
                                f"it needs an admin ({ADMINS}); you are {who}"), None
        return attrs.evolve(msg, user=who.name), None, None
    if kind in (m.UpdateNodes, m.NodeMembership, m.Reconfigure, m.GuardRequest, m.RebootNodes,
                m.Takeover, m.ReconfigureDryRun):
        if not who.admin:
            return msg, _refuse(conn, who, _what(msg), f"it needs an admin ({ADMINS}); you "
                                                       f"are {who}"), None
        if kind is m.UpdateNodes:
            return attrs.evolve(msg, user=who.name, uid=who.uid), None, None
        return attrs.evolve(msg, user=who.name), None, None
    return msg, None, None  # Ping, GetConfig: anybody


def _private_read(config: ClusterConfig, conn: Connection, who: Identity, msg: Any
                  ) -> tuple[Any, Any, After | None] | None:
    """gate() for the listings PrivateData limits; None for any other request."""
    kind = type(msg)
    private = config.access.private_data
    if kind is m.GetJobs:
        if who.admin or "jobs" not in private:
            return msg, None, None
        return msg, None, lambda reply: own_jobs(reply, who)
    if kind is m.GetWhy and not who.admin and "jobs" in private:  # rqueue --why: own jobs
        return attrs.evolve(msg, only_uid=who.uid), None, None
    if kind is m.ShareRequest:  # rshare (sshare): PrivateData=usage
        return share_request(msg, who, private), None, None
    if kind is m.GetAcct:
        # racct (sacct): with PrivateData=jobs or =usage a user's query covers their own jobs
        # only, as slurmdbd answers sacct; an admin's is as asked
        if who.admin or not ({"jobs", "usage"} & set(private)):
            return msg, None, None
        return attrs.evolve(msg, uids=(who.uid,), users=()), None, None
    if kind is m.GetSnapshot or kind is m.GetEvents:
        hidden = "nodes" in private or (kind is m.GetEvents and "events" in private)
        if hidden and not who.admin:
            word = "nodes" if "nodes" in private else "events"
            what = "node information" if kind is m.GetSnapshot else "the event log"
            return msg, _refuse(conn, who, what, f"PrivateData={word} shows it to admins "
                                                 f"({ADMINS}) only"), None
        return msg, None, None
    return None


def _what(msg: Any) -> str:
    if type(msg) is m.UpdateNodes:
        return f"update NodeName={msg.node_names}"
    if type(msg) is m.NodeMembership:
        return f"{msg.action} NodeName={msg.node_names}"
    if type(msg) is m.Reconfigure:
        return "reconfigure"
    if type(msg) is m.ReconfigureDryRun:
        return "reconfigure --dry-run"
    if type(msg) is m.RebootNodes:
        return f"reboot {msg.node_names}"
    if type(msg) is m.Takeover:
        return "takeover"
    return f"{msg.action} guard{' ' + msg.guard if msg.guard else ''}"


def _refuse(conn: Connection, who: Identity, what: str, why: str) -> m.Error:
    text = denied(what, why)
    logs.event("permission denied", logging.WARNING, peer=conn.peer, user=who.name,
               uid=who.uid, request=what)
    return m.Error("permission_denied", text)


def own_jobs(reply: Any, who: Identity) -> Any:
    """A JobList reply cut to the caller's own jobs (PrivateData=jobs)."""
    if not isinstance(reply, Prebuilt) or reply.type_name != "JobList":
        return reply
    doc = orjson.loads(reply.body)
    doc["jobs"] = [j for j in doc.get("jobs", ()) if record_owner(j) == who.uid]
    return Prebuilt("JobList", orjson.dumps(doc))


def record_owner(record: dict) -> int | None:
    uid = record.get("uid")
    if uid is None and isinstance(record.get("req"), dict):
        uid = record["req"].get("uid")
    return uid if isinstance(uid, int) else None


def nice_refusal(who: Identity, msg: m.SubmitJob) -> m.Error | None:
    """A negative nice raises a job above others': an administrator's right (root, SlurmUser or
    AdminUsers, as slurmctld's operator check), decided here with every other right."""
    if msg.nice >= 0 or who.admin:
        return None
    return m.Error("bad_request", "Invalid --nice value: only an administrator (root, SlurmUser "
                   "or AdminUsers) may give a negative nice", field="nice")


# -- DisableRootJobs ---------------------------------------------------------------------------


def root_job_refusal(config: ClusterConfig, msg: m.SubmitJob) -> m.Error | None:
    """Slurm's DisableRootJobs: root's job is refused when any partition it names (or the
    default one) disables root jobs; a partition's own setting beats the global one."""
    if msg.uid != 0:
        return None
    names = [p for p in msg.partition.split(",") if p] if msg.partition else []
    if not names:
        default = config.default_partition
        names = [default.name] if default is not None else []
    for name in names:
        part = config.partition(name)
        if part is None:
            continue  # the submit path names an unknown partition itself
        if root_jobs_disabled(config, part.options):
            # sbatch says "Batch job submission failed: Invalid user id" (ESLURM_USER_ID_MISSING)
            return m.Error("permission_denied", f"Invalid user id: root may not submit jobs to "
                           f"partition {name} (DisableRootJobs=YES); submit as another user",
                           field="uid")
    return None


def root_jobs_disabled(config: ClusterConfig, options: tuple[tuple[str, str], ...]) -> bool:
    own = dict(options).get("DisableRootJobs")
    if own is None:
        return config.access.disable_root_jobs
    return own.strip().upper() in ("YES", "TRUE", "1", "Y")


# -- HTTP (ctld/web): a token names a user, who gets that user's rights ------------------------


def share_request(msg: m.ShareRequest, who: Identity, private: tuple[str, ...]
                  ) -> m.ShareRequest:
    """Under PrivateData=usage a user who is not an admin is answered only their own
    associations' rows (the tree's AdminLevel may widen it: ctld/accounts/store.py)."""
    return attrs.evolve(msg, user=who.name if "usage" in private and not who.admin else "")


def http_write_refusal(config: ClusterConfig, name: str, what: str) -> str | None:
    who = identify_name(config, name)
    if who.admin:
        return None
    return denied(what, f"it needs an admin ({ADMINS}); the token is {name}'s")


def http_hidden(config: ClusterConfig, who: Identity | None, what: str) -> str | None:
    """The refusal of a read of `what` ("nodes") that PrivateData hides from this reader (None:
    no token), or None."""
    if what not in config.access.private_data or (who is not None and who.admin):
        return None
    return denied("node information", f"PrivateData={what} shows it to admins ({ADMINS}) only")


def visible_jobs(config: ClusterConfig, who: Identity | None, records: list[T],
                 owner: Callable[[Any], int | None] = record_owner) -> list[T]:
    """PrivateData=jobs: a reader who is not an admin sees their own jobs only (no token: none).
    `owner`: whose job a record is (the web layer's kept pieces carry it decoded)."""
    if "jobs" not in config.access.private_data or (who is not None and who.admin):
        return records
    uid = who.uid if who is not None else None
    return [r for r in records if uid is not None and owner(r) == uid]
