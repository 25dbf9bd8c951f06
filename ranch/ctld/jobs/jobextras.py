"""The controller's side of sbatch's further options (issue 22), kept out of the job core so
that the job modules call it in one line each: the submit checks (constraint, dependency,
nice, signal, mail types), priority with --nice, the record fields show job and squeue print,
and the JobSpec fields a node needs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ranch.conf import hostlist
from ranch.ctld.jobs import dependencies
from ranch.protocol import messages as m
from ranch.sched import features

if TYPE_CHECKING:
    from ranch.ctld.jobs.ports import NodeView

NICE_LIMIT = 2147483645
OPEN_MODES = ("", "append", "truncate")
OVERSUBSCRIBE = ("", "USER", "MCS", "YES")
MAIL_WORDS = frozenset({"BEGIN", "END", "FAIL", "REQUEUE", "INVALID_DEPEND", "STAGE_OUT",
                        "TIME_LIMIT", "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50",
                        "ARRAY_TASKS"})


def screen(nodes: Mapping[str, NodeView], req: m.SubmitJob, members: dict[str, Any]
           ) -> tuple[dict[str, Any], m.Error | None]:
    """(the partition's nodes the job may use, or the refusal naming the field). Called by
    the submit checks once the partition's members are known."""

    def bad(message: str, fld: str) -> tuple[dict[str, Any], m.Error]:
        return members, m.Error("bad_request", message, field=fld)

    if abs(req.nice) > NICE_LIMIT:
        return bad(f"Invalid --nice value, out of range (+/- {NICE_LIMIT})", "nice")
    if req.open_mode not in OPEN_MODES:
        return bad(f"open_mode must be append or truncate, got {req.open_mode!r}", "open_mode")
    if req.oversubscribe not in OVERSUBSCRIBE:
        return bad(f"oversubscribe must be USER, MCS or YES, got {req.oversubscribe!r}",
                   "oversubscribe")
    if req.warn_signal and not 0 < req.warn_signal <= 0xFFFF:  # get_signal_opts' range
        return bad(f"Invalid --signal specification: signal {req.warn_signal}", "warn_signal")
    if not 0 <= req.warn_time <= 0xFFFF:
        return bad(f"Invalid --signal specification: {req.warn_time} seconds", "warn_time")
    unknown = [w for w in req.mail_type if w not in MAIL_WORDS]
    if unknown:
        return bad(f"Invalid --mail-type specification: {','.join(unknown)}", "mail_type")
    if req.dependency and (why := dependencies.check(req.dependency)):
        return bad(why, "dependency")
    if not req.constraint:
        return members, None
    known = {f for n in nodes.values() for f in n.cfg.features}
    expr = features.check(req.constraint, known)
    if isinstance(expr, str):
        return bad(expr, "constraint")
    try:
        wanted = hostlist.expand(req.nodelist) if req.nodelist.strip() else []
    except ValueError:
        wanted = []  # the submit checks word that refusal
    lacking = [n for n in wanted if n in members
               and not features.matches(expr, members[n].cfg.features)]
    if lacking:
        return bad(f"Requested node configuration is not available: node(s) "
                   f"{hostlist.fold(lacking)} lack the features {req.constraint}", "constraint")
    kept = {name: n for name, n in members.items() if features.matches(expr, n.cfg.features)}
    if not kept:
        return bad(f"Requested node configuration is not available: no node of the partition "
                   f"has the features {req.constraint}", "constraint")
    return kept, None


def priority(base: int, req: m.SubmitJob) -> int:
    """priority/basic with --nice: each later job one less, less its nice (never below 1)."""
    prio = base
    if req.nice <= 0 or prio > req.nice + 1:
        prio -= req.nice
    return max(1, prio)


def spec_fields(req: m.SubmitJob) -> dict[str, Any]:
    """The JobSpec fields the node acts on."""
    return {"open_mode": req.open_mode, "warn_signal": req.warn_signal,
            "warn_time": req.warn_time, "warn_batch": req.warn_batch, "input": req.input}


def record_fields(job: Any, dependency: str) -> dict[str, Any]:
    """What the job record (squeue, show job, HTTP) adds for these options; `dependency`: what
    it shows of its dependency (ctld/jobs/dependbook.py)."""
    req = job.req
    return {
        "account": req.account,
        "qos": req.qos,
        "wckey": req.wckey,
        "comment": req.comment,
        "nice": req.nice,
        "features": req.constraint,
        "dependency": dependency,
        "kill_on_invalid_dep": req.kill_on_invalid_dep,
        "mail_type": list(req.mail_type),
        "mail_user": (req.mail_user or req.user) if req.mail_type else "",
        "oversubscribe": req.oversubscribe,
        "hint": req.hint,
        "ntasks_per_node": req.ntasks_per_node,
        "max_nodes": req.max_nodes,  # show job's NumNodes=MIN-MAX while pending
        "given_blank": list(req.given_blank),  # show job: Account= rather than (null)
        "ntasks_given": req.ntasks_given,  # show job: NumTasks of -N 2 is 2, a task a node
        "min_nodes": req.num_nodes,  # show job: TRES node= of a pending job, as asked
        "gpus_per_task": req.gpus_per_task,
        "cpus_per_gpu": req.cpus_per_gpu,
        "mem_per_cpu": req.mem_per_cpu,
        "mem_per_gpu": req.mem_per_gpu,
        "open_mode": req.open_mode,
        "stdin": req.input,
        "warn_signal": _signal_text(req),  # --signal as given ("signal" is the exit one)
        "export": req.export,
        "get_user_env": req.get_user_env,
    }


def _signal_text(req: m.SubmitJob) -> str:
    if not req.warn_signal:
        return ""
    import signal as signals

    try:
        name = signals.Signals(req.warn_signal).name.removeprefix("SIG")
    except ValueError:
        name = str(req.warn_signal)
    return f"{'B:' if req.warn_batch else ''}{name}@{req.warn_time}"
