"""sacctmgr's QOS fields (qos_functions.c _set_rec, common.c sacctmgr_print_qos_limits): the
`set` words to a Qos, with its refusals and warnings, and `add qos`'s confirmation."""

from __future__ import annotations

from ranch.assoc import ops
from ranch.assoc.acctmgr_ask import Reply, commit
from ranch.assoc.acctmgr_values import secs_text
from ranch.assoc.db import AcctDb, Refused
from ranch.assoc.records import PREEMPT_MODES

# the flags in their bit order (slurmdb_qos_flags_str prints them so)
FLAGS = ("DenyOnLimit", "EnforceUsageThreshold", "NoReserve", "PartitionMaxNodes",
         "PartitionMinNodes", "OverPartQOS", "PartitionTimeLimit", "RequiresReservation",
         "NoDecay", "UsageFactorSafe")
# sacctmgr_print_qos_limits' order
ORDER = ("flags", "grace_time", "GrpJobs", "GrpSubmitJobs", "GrpTRES", "GrpTRESMins",
         "GrpTRESRunMins", "GrpWall", "MaxJobsPerAccount", "MaxJobsPerUser",
         "MaxSubmitJobsPerAccount", "MaxSubmitJobsPerUser", "MaxTRESPerAccount", "MaxTRES",
         "MaxTRESPerNode", "MaxTRESPerUser", "MinTRES", "MaxTRESMins", "MaxWall", "preempt",
         "preempt_mode", "priority", "usage_factor", "usage_threshold")
NAMES = {"MaxTRES": "MaxTRESPerJob", "MinTRES": "MinTRESPerJob", "preempt_mode": "PreemptMode",
         "usage_factor": "UsageFactor", "grace_time": "GraceTime",
         "usage_threshold": "UsageThreshold"}
WARN = "sacctmgr: error: Invalid value for {} ({})\n"


def _label(key: str) -> str:
    if key == "MaxJobsPerUser":
        return "  MaxJobsPerUser = "  # sacctmgr's own spacing for this one
    name = NAMES.get(key) or (key if key[0].isupper() else key.title())
    return f"  {name:<25}= "


def _flags(text: str) -> tuple[str, ...]:
    if text == "-1":  # clears them
        return ()
    given = [f for f in text.split(",") if f]
    canon = {f.lower(): f for f in FLAGS}
    bad = [f for f in given if f.lower() not in canon]
    if bad:
        raise Refused(out=f" Unknown QOS flag used in:\n  '{text}'\n Valid QOS flags are\n"
                          f"  '{','.join(FLAGS)}'\n")
    return tuple(f for f in FLAGS if f.lower() in {g.lower() for g in given})


def qos_fields(db: AcctDb, other: dict[str, str]) -> tuple[dict[str, object], str]:
    """(Qos attributes, sacctmgr's warnings for values it skipped and goes on without)."""
    fields: dict[str, object] = {}
    warn = ""
    for key, conv, label in (("priority", int, "Priority"), ("usage_factor", float,
                                                              "UsageFactor"),
                             ("grace_time", int, "GraceTime"),
                             ("usage_threshold", float, "UsageThreshold")):
        if key in other:
            try:
                fields[key] = conv(other[key])
            except ValueError:
                warn += WARN.format(label, other[key])
    if "usage_threshold" in fields:
        fields["usage_threshold"] = f"{fields['usage_threshold']:.6f}"
    if "flags" in other:
        fields["flags"] = _flags(other["flags"])
    if "preempt_mode" in other:
        mode = other["preempt_mode"].lower()
        if mode not in PREEMPT_MODES:
            raise Refused(err=f" Bad Preempt Mode given: PreemptMode={other['preempt_mode']}\n")
        fields["preempt_mode"] = mode
    if "preempt" in other:
        names = tuple(p for p in other["preempt"].lower().split(",") if p)
        bad = next((p for p in names if db.qos_named(p) is None), None)
        if bad is not None:
            valid = ",".join(q.name for q in sorted(db.qos, key=lambda q: q.id))
            raise Refused(err=f"sacctmgr: error: You gave a bad qos '{bad}'. Valid QOS's are "
                              f"{valid}\n")
        fields["preempt"] = names
    if "preempt_exempt_time" in other:
        secs = time_str2secs(other["preempt_exempt_time"])
        if secs is None:
            raise Refused(err=" Bad PreemptExemptTime format: PreemptExemptTime="
                              f"{other['preempt_exempt_time']}\n")
        fields["preempt_exempt_time"] = secs_text(secs)
    return fields, warn


def time_str2secs(text: str) -> int | None:
    """Slurm's time_str2secs: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; None if it is none."""
    days, _, rest = text.strip().rpartition("-") if "-" in text else ("", "", text.strip())
    parts = rest.split(":")
    if not all(p.isdigit() for p in parts) or (days and not days.isdigit()) or len(parts) > 3:
        return None
    nums = [int(p) for p in parts]
    if days:
        h, m, sec = [*nums, 0, 0][:3]
        return int(days) * 86400 + h * 3600 + m * 60 + sec
    if len(nums) == 3:
        return nums[0] * 3600 + nums[1] * 60 + nums[2]
    return nums[0] * 60 + (nums[1] if len(nums) == 2 else 0)


def _shown(fields: dict[str, object], lims: dict[str, str], other: dict[str, str]
           ) -> dict[str, str]:
    shown = {**{k: str(v) for k, v in fields.items()}, **lims}
    for key in ("flags", "preempt"):
        if key in fields:
            shown[key] = ",".join(str(x) for x in fields[key])  # type: ignore[attr-defined]
    if "preempt_mode" in fields:  # preempt_mode_string's capitals
        shown["preempt_mode"] = str(fields["preempt_mode"]).upper()
    for key in ("usage_factor", "usage_threshold"):
        if key in fields:
            shown[key] = f"{float(str(fields[key])):.4f}"
    return shown


def add_qos(db: AcctDb, names: tuple[str, ...], lims: dict[str, str], other: dict[str, str],
            immediate: bool, stdin: str | None) -> Reply:
    fields, warn = qos_fields(db, other)
    description = other.get("description", "")
    done = ops.add_qos(db, names, description=description, limits=tuple(sorted(lims.items())),
                       **fields)
    out = " Adding QOS(s)\n" + "".join(f"  {n}\n" for n in done.names)
    out += f" Settings\n  Description    = {description or done.names[-1]}\n"
    shown = _shown(fields, lims, other)
    out += "".join(_label(key) + shown[key] + "\n" for key in ORDER if shown.get(key))
    reply = commit(db, done.db, out, immediate, stdin)
    return Reply(reply.db, reply.out, warn, reply.rc, reply.stdin)
