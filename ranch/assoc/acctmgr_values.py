"""sacctmgr's values: `set` keys to the model's limits and QOS fields, and each column's text for
an association, user, account or QOS row (association_functions.c, qos_functions.c)."""

from __future__ import annotations

from ranch.assoc.acctmgr_parse import match
from ranch.assoc.db import AcctDb
from ranch.assoc.records import FS_PARENT, PRIORITY, Assoc, Qos, User

# `set`/`where` limit keys: (spelling, least letters, canonical), as common.c sacctmgr_set_*
LIMIT_KEYS = (("GrpTRESMins", 8, "GrpTRESMins"), ("GrpTRESRunMins", 8, "GrpTRESRunMins"),
              ("GrpTRES", 7, "GrpTRES"), ("GrpJobs", 4, "GrpJobs"),
              ("GrpSubmitJobs", 4, "GrpSubmitJobs"), ("GrpWall", 4, "GrpWall"),
              ("MaxTRESMinsPerJob", 8, "MaxTRESMins"), ("MaxTRESMins", 8, "MaxTRESMins"),
              ("MaxTRESPerNode", 11, "MaxTRESPerNode"), ("MaxTRESPerUser", 11, "MaxTRESPerUser"),
              ("MaxTRESPU", 9, "MaxTRESPerUser"), ("MaxTRES", 7, "MaxTRES"),
              ("MaxTRESPerJob", 7, "MaxTRES"), ("MaxJobsPerUser", 8, "MaxJobsPerUser"),
              ("MaxJobsPU", 8, "MaxJobsPerUser"), ("MaxJobs", 4, "MaxJobs"),
              ("MaxSubmitJobsPerUser", 10, "MaxSubmitJobsPerUser"),
              ("MaxSubmitPU", 10, "MaxSubmitJobsPerUser"), ("MaxSubmitJobs", 4, "MaxSubmitJobs"),
              ("MaxWallDurationPerJob", 4, "MaxWall"), ("MinTRESPerJob", 7, "MinTRES"))
TRES_ORDER = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages")
TIME_LIMITS = ("GrpWall", "MaxWall")
COUNT_LIMITS = ("GrpJobs", "GrpSubmitJobs", "MaxJobs", "MaxSubmitJobs", "MaxJobsPerUser",
                "MaxSubmitJobsPerUser", "MaxJobsPerAccount", "MaxSubmitJobsPerAccount",
                PRIORITY)


class BadValue(ValueError):
    pass


def shares_value(text: str) -> int:
    """A Fairshare: a count, or `parent` (the parent's share, SLURMDB_FS_USE_PARENT)."""
    return FS_PARENT if text.lower() == "parent" else int(text)


def shares_text(shares: int) -> str:
    return "parent" if shares == FS_PARENT else str(shares)


def admin_level(text: str) -> str:
    """str_2_slurmdb_admin_level: only the first letter counts; anything else is not set."""
    first = text[:1].lower()
    return {"n": "None", "o": "Operator", "s": "Administrator", "a": "Administrator"}.get(
        first, "")


def minutes(text: str) -> int:
    """Slurm's time_str2mins: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS."""
    days, _, rest = text.rpartition("-") if "-" in text else ("", "", text)
    parts = [int(p) for p in rest.split(":")]
    d = int(days) if days else 0
    if days:
        h, m, s = [*parts, 0, 0][:3]
    elif len(parts) == 3:
        h, m, s = parts
    elif len(parts) == 2:
        h, m, s = 0, parts[0], parts[1]
    else:
        h, m, s = 0, parts[0], 0
    return (d * 24 + h) * 60 + m + (1 if s > 0 else 0)  # Slurm rounds seconds up


def time_text(mins: int) -> str:
    """secs2time_str of minutes: HH:MM:SS, or D-HH:MM:SS past a day."""
    return secs_text(mins * 60)


def secs_text(secs: int) -> str:
    d, rem = divmod(secs, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def tres_text(value: str) -> str:
    """A TRES list in Slurm's order (by TRES id: cpu, mem, energy, node, billing, ..., gres)."""
    pairs = dict(p.split("=", 1) for p in value.split(",") if "=" in p)
    pairs = {k.lower(): v for k, v in pairs.items() if v != "-1"}
    rank = {t: i for i, t in enumerate(TRES_ORDER)}
    return ",".join(f"{k}={v}" for k, v in sorted(pairs.items(),
                                                  key=lambda kv: (rank.get(kv[0], 99), kv[0])))


def limit_value(name: str, value: str) -> str:
    """The stored text of a limit; "-1" clears it (stored as "")."""
    if value == "-1":
        return ""
    if name in TIME_LIMITS:
        try:
            return time_text(minutes(value))
        except ValueError:
            raise BadValue(f" Bad {name} time format: ") from None
    if name in COUNT_LIMITS:
        if not value.isdigit():
            raise BadValue(f"sacctmgr: error: Invalid value for {name} ({value})\n")
        return str(int(value))
    return tres_text(value)


def limit_key(key: str) -> str | None:
    exact = {s.lower(): c for s, _, c in LIMIT_KEYS}.get(key.lower())
    return exact or match(key, tuple((s.lower(), n, c) for s, n, c in LIMIT_KEYS))


def _tres_part(value: str, tres: str) -> str:
    return dict(p.split("=", 1) for p in value.split(",") if "=" in p).get(tres, "")


def assoc_cell(db: AcctDb, a: Assoc, kind: str) -> str:
    if ":" in kind:
        name, _, tres = kind.partition(":")
        return _tres_part(db.effective(a, name), tres)
    simple = {"acct": a.account, "cluster": a.cluster, "user": a.user, "part": a.partition,
              "id": str(a.id), "share": shares_text(a.shares)}
    if kind in simple:
        return simple[kind]
    if kind == "pname":
        return a.parent if not a.user else ""
    if kind == "qos":
        return ",".join(sorted(db.effective_qos(a)))
    if kind == "dqos":
        return db.effective_def_qos(a)
    limit = {"maxj": "MaxJobs", "maxs": "MaxSubmitJobs", "prio": PRIORITY}.get(kind, kind)
    return db.effective(a, limit)


def user_cell(u: User, kind: str) -> str | None:
    return {"user": u.name, "dacct": u.default_account, "admin": u.admin_level}.get(kind)


def qos_cell(q: Qos, kind: str, db: AcctDb) -> str:
    simple = {"name": q.name, "prio": str(q.priority), "id": str(q.id), "desc": q.description,
              "grace": secs_text(q.grace_time), "preemptmode": q.preempt_mode,
              "flags": ",".join(q.flags), "ut": q.usage_threshold,
              "uf": f"{q.usage_factor:.6f}", "preemptexempt": q.preempt_exempt_time,
              "preempt": ",".join(sorted(q.preempt))}
    if kind in simple:
        return simple[kind]
    if ":" in kind:
        name, _, tres = kind.partition(":")
        return _tres_part(q.limit(name), tres)
    return q.limit({"maxj": "MaxJobsPerUser", "maxs": "MaxSubmitJobsPerUser"}.get(kind, kind))
