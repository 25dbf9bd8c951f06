"""The admin commands' messages (rinfo, rcontrol) with the controller: one request, one reply,
then close."""

from __future__ import annotations

import attrs


@attrs.frozen
class GetSnapshot:
    """Ask for every node and partition. The controller answers from a cached snapshot.

    `fields` names the node-record keys wanted (empty = all): each record then holds only those
    of its keys, unknown names are skipped; partitions and the other Snapshot fields are whole.
    A controller that ignores `fields` sends every key, and readers must accept that."""

    metrics: bool = False
    fields: tuple[str, ...] = ()


@attrs.frozen
class Snapshot:
    """Nodes and partitions as plain dicts (shape: docs/internals.md, "Snapshot records")."""

    cluster_name: str
    generated_at: float
    nodes: tuple[dict, ...]
    partitions: tuple[dict, ...]
    state_age: float = 0.0  # seconds the listing was old when sent (ctld/rpc/readcache.py)


@attrs.frozen
class UpdateNodes:
    node_names: str  # hostlist expression or ALL
    state: str | None = None
    reason: str | None = None
    user: str = ""
    uid: int = -1


@attrs.frozen
class RebootNodes:
    """`rcontrol reboot [ASAP] [nextstate=RESUME|DOWN] [reason=...] NODES|ALL`; answered
    UpdateResult (issue 33). Cancelling is UpdateNodes State=CANCEL_REBOOT, as in Slurm."""

    node_names: str  # hostlist expression or ALL
    asap: bool = False
    next_state: str | None = None  # RESUME | DOWN
    reason: str | None = None
    user: str = ""


@attrs.frozen
class RebootNode:
    """Pushed to rnoded: run RebootProgram now (the node is idle; its reboot was issued)."""

    reason: str = ""


@attrs.frozen
class ReservationRequest:
    """`rcontrol create|update|delete|show reservation` (issue 33); answered ReservationReply.
    Times are epoch seconds (the command parses Slurm's forms); None leaves a field as it was."""

    action: str  # create | update | delete | show
    name: str = ""
    start: float | None = None
    end: float | None = None
    duration: int | None = None  # minutes; -1: UNLIMITED
    nodes: str | None = None  # hostlist or ALL
    node_count: int | None = None
    flags: tuple[str, ...] | None = None  # MAINT IGNORE_JOBS OVERLAP FLEX
    users: tuple[str, ...] | None = None
    user: str = ""


@attrs.frozen
class ReservationReply:
    """Reservations as dicts: name, start_time, end_time, duration, nodes, node_count, flags,
    users, state (ACTIVE/INACTIVE), created_by."""

    ok: bool
    name: str = ""
    errors: tuple[str, ...] = ()
    reservations: tuple[dict, ...] = ()


@attrs.frozen
class UpdateResult:
    ok: bool
    changed: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


@attrs.frozen
class NodeMembership:
    """`rcontrol approve|reject|delete NodeName=HOSTLIST [Reason=...]`; answered UpdateResult."""

    action: str  # approve | reject | delete
    node_names: str  # hostlist expression
    reason: str | None = None
    user: str = ""


@attrs.frozen
class GetEvents:
    """`rcontrol events`: the event log, oldest first. With `follow` the reply is the first of
    a stream of Events frames on this connection, one per batch of new events."""

    since: float = 0.0  # wall clock; 0 = from the oldest kept
    nodes: str = ""  # hostlist expression; "" = every node
    limit: int = 0  # the newest `limit` events only (0 = all)
    follow: bool = False


@attrs.frozen
class Events:
    """Event records (docs/internals.md "Event records"); `missed`: events a follower that fell
    behind did not get (its queue overflowed) since the last batch."""

    events: tuple[dict, ...] = ()
    missed: int = 0


@attrs.frozen
class GetConfig:
    pass


@attrs.frozen
class ConfigDump:
    path: str
    config_hash: str
    items: tuple[tuple[str, str], ...]  # ("SlurmdTimeout", "300 sec"), in Slurm's show-config order
    ignored: tuple[str, ...] = ()  # version 6: keys of `items` kept as written, not acted on


@attrs.frozen
class Reconfigure:
    user: str = ""


@attrs.frozen
class ReconfigureResult:
    ok: bool
    errors: tuple[str, ...] = ()  # each "PATH:LINE:COL: message"
    config_hash: str = ""
    warnings: tuple[str, ...] = ()  # version 6: the new config's warnings, as rctld logs them


@attrs.frozen
class GuardRequest:
    """`rcontrol show guards` (action "show"), `rcontrol confirm down|drain [NodeName=...]`,
    `rcontrol reset guard [down|drain]`: the controller's guards (issue 18). Answered
    GuardStatus."""

    action: str  # show | confirm | reset
    guard: str = ""  # down | drain ("" with reset: both)
    node_names: str = ""  # confirm only these (hostlist); "" = every held node
    user: str = ""


@attrs.frozen
class GuardStatus:
    """Each guard as a dict (guard, state, since, percent, window, min_nodes, detail, nodes,
    count) and the controller's own stalls (stalls, stalled_seconds, last_stall_seconds,
    last_stall_at, clock_jumps); `changed`: the nodes an action confirmed or released."""

    ok: bool
    guards: tuple[dict, ...] = ()
    controller: dict = attrs.Factory(dict)
    changed: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


@attrs.frozen
class Ping:
    pass


@attrs.frozen
class Pong:
    cluster_name: str
    version: str
    started_at: float


@attrs.frozen
class GetDiag:
    """rdiag (sdiag): the scheduler's and backfill's statistics."""


@attrs.frozen
class Diag:
    """sdiag's figures under slurmrestd's `diag` names (ctld/jobs/schedstats.py)."""

    stats: dict = attrs.Factory(dict)


@attrs.frozen
class Credential:
    """AuthType=auth/munge: the first frame of a command's connection. `cred` is a MUNGE
    credential whose payload is the key that signs this frame and every later one on the
    connection, both ways (protocol/userauth.py); rctld takes the user from it alone."""

    cred: str


@attrs.frozen
class Error:
    """Any refusal: `code` is a stable word (bad_mac, stale, replay, unknown_type, too_large,
    bad_request, unknown_node, version, internal, busy); `field` names the offending field if
    any."""

    code: str
    message: str
    field: str = ""


@attrs.frozen
class Takeover:
    """rcontrol takeover (issue 32): the controller that holds the seat gives it up to a
    standby (answered with Ack first). Admins only; `user` as in Reconfigure."""

    user: str = ""


@attrs.frozen
class AcctmgrRequest:
    """racctmgr (sacctmgr): one command line over rctld's accounting tree (issue 43). `words`:
    the line without its options; `options`: the long names of those given (immediate,
    parsable2, noheader, ...). `stdin`: what the user typed at its questions so far, None for
    the first send (a question then waits: nothing is changed, and the reply says `waiting`);
    `final`: no more answers come (the terminal timed out or closed), so a question left
    unanswered is a timeout. `files`: load's file as (path, text), read where racctmgr runs;
    `unreadable`: (path, why) when it could not be. `user`/`uid`: the caller, which rctld
    takes from the connection (a user's MUNGE identity), whatever was sent."""

    words: tuple[str, ...]
    options: tuple[str, ...] = ()
    stdin: str | None = None
    final: bool = False
    files: tuple[tuple[str, str], ...] = ()
    unreadable: tuple[tuple[str, str], ...] = ()
    user: str = ""
    uid: int = -1


@attrs.frozen
class AcctmgrReply:
    """What sacctmgr prints and exits with; `files`: (path, text) dump writes where racctmgr
    runs; `waiting`: a question is unanswered (stdout ends where it waits for "(N/y): ")."""

    out: str = ""
    err: str = ""
    rc: int = 0
    files: tuple[tuple[str, str], ...] = ()
    waiting: bool = False


@attrs.frozen
class ShareRequest:
    """rshare (sshare): the fair-share rows of the accounting tree (issue 43). `user`: the
    controller writes in the caller's name under PrivateData=usage (whatever was sent), whose
    own associations' rows alone are answered; "": every row."""

    user: str = ""


@attrs.frozen
class ShareLine:
    """One association as sshare shows it (ranch/assoc/shares.py computes it): `depth` indents
    the account; `raw_shares` -1 for root's own row, 0x7FFFFFFF for Fairshare=parent;
    `level_fs` None for infinity (no usage); `fairshare` None where sshare leaves it blank;
    `tres_run_mins` the TRES-minutes its running jobs have left, as `cpu=N,mem=N,...`."""

    depth: int
    account: str
    user: str
    partition: str
    id: int
    raw_shares: int
    norm_shares: float
    raw_usage: float
    norm_usage: float
    effective_usage: float
    level_fs: float | None
    fairshare: float | None
    grp_tres_mins: str = ""
    tres_run_mins: str = ""


@attrs.frozen
class ShareReply:
    """`enabled`: the accounting store is on (off: sshare's header and no rows, as a Slurm
    without slurmdbd); `cluster`: ClusterName."""

    enabled: bool = False
    cluster: str = ""
    lines: tuple[ShareLine, ...] = ()


@attrs.frozen
class PriorityRequest:
    """rsprio (sprio): the pending jobs' priority factors (issue 44), filtered by job ids,
    users and partitions (empty: all)."""

    jobs: tuple[int, ...] = ()
    users: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()


@attrs.frozen
class PriorityWeights:
    """PriorityWeight*; `tres` PriorityWeightTRES as sprio -w prints it."""

    age: int = 0
    assoc: int = 0
    fairshare: int = 0
    jobsize: int = 0
    partition: int = 0
    qos: int = 0
    tres: str = ""


@attrs.frozen
class PriorityRow:
    """One job x partition as sprio shows it: each factor weighted (slurmctld's prio_factors);
    `direct` an admin's Priority= (0: none), `tres` (name, weighted) and `tres_norm` (name,
    factor) of the TRES that count."""

    job_id: int
    partition: str
    user: str
    direct: int
    age: float
    assoc: float
    fairshare: float
    jobsize: float
    part: float
    qos: float
    tres: tuple[tuple[str, float], ...]
    nice: int
    site: int = 0
    tres_norm: tuple[tuple[str, float], ...] = ()


@attrs.frozen
class PriorityReply:
    """`multifactor`: PriorityType=priority/multifactor (off: sprio refuses, as Slurm's)."""

    multifactor: bool = False
    weights: PriorityWeights = PriorityWeights()
    rows: tuple[PriorityRow, ...] = ()


ADMIN_MESSAGES: tuple[type, ...] = (
    GetSnapshot, Snapshot, UpdateNodes, UpdateResult, RebootNodes, RebootNode, ReservationRequest,
    ReservationReply, NodeMembership, GetEvents, Events, GetConfig, ConfigDump, Reconfigure,
    ReconfigureResult, Takeover, Ping, Pong, GetDiag, Diag, Error, Credential, GuardRequest,
    GuardStatus, AcctmgrRequest, AcctmgrReply, ShareRequest, ShareLine, ShareReply,
    PriorityRequest, PriorityWeights, PriorityRow, PriorityReply)
