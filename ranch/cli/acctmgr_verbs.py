"""sacctmgr's add, modify and delete over an AcctDb: the `set` words to the model, the
confirmation texts, and the commit question (common.c commit_check) unless -i."""

from __future__ import annotations

import attrs

from ranch.assoc import ops
from ranch.assoc.db import AcctDb
from ranch.cli.acctmgr_parse import Command, match
from ranch.cli.acctmgr_values import BadValue, limit_key, limit_value

QUESTION = "Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): "
# sacctmgr_print_qos_limits' labels, in its order
QOS_LABELS = (
    ("flags", "  Flags                    = "), ("GrpJobs", "  GrpJobs                  = "),
    ("GrpSubmitJobs", "  GrpSubmitJobs            = "),
    ("GrpTRES", "  GrpTRES                  = "), ("GrpWall", "  GrpWall                  = "),
    ("MaxJobsPerUser", "  MaxJobsPerUser = "),
    ("MaxSubmitJobsPerUser", "  MaxSubmitJobsPerUser     = "),
    ("MaxTRES", "  MaxTRESPerJob            = "),
    ("MaxTRESPerUser", "  MaxTRESPerUser           = "),
    ("MaxWall", "  MaxWallDurationPerJob    = "), ("priority", "  Priority                 = "))
OTHER_KEYS = (("description", 3, "description"), ("organization", 3, "organization"),
              ("parent", 3, "parent"), ("defaultaccount", 3, "default_account"),
              ("adminlevel", 2, "admin_level"), ("accounts", 2, "accounts"),
              ("partitions", 3, "partition"), ("clusters", 2, "clusters"),
              ("fairshare", 1, "shares"), ("shares", 1, "shares"), ("qoslevel", 3, "qos"),
              ("defaultqos", 3, "def_qos"), ("priority", 3, "priority"), ("flags", 1, "flags"),
              ("usagefactor", 6, "usage_factor"), ("preemptmode", 8, "preempt_mode"))


@attrs.frozen
class Reply:
    db: AcctDb
    out: str = ""
    err: str = ""
    rc: int = 0


def settings(cmd: Command) -> tuple[dict[str, str], dict[str, str]]:
    """The `set` words: (limits by canonical name, other fields by model name)."""
    lims: dict[str, str] = {}
    other: dict[str, str] = {}
    for key, value in cmd.sets:
        name = limit_key(key)
        if name is not None:
            lims[name] = limit_value(name, value)
            continue
        field = match(key, OTHER_KEYS)
        if field is None:
            raise BadValue(f" Unknown option: {key}={value}\n Use keyword 'where' to modify "
                           "condition\n")
        other[field] = value
    return lims, other


def commit(before: AcctDb, after: AcctDb, out: str, immediate: bool, answer: str | None) -> Reply:
    if immediate:
        return Reply(after, out)
    out += QUESTION
    if answer is None:
        return Reply(before, out + "timeout\n Changes Discarded\n")
    out += "\n"
    if answer[:1] in ("y", "Y"):
        return Reply(after, out)
    return Reply(before, out + " Changes Discarded\n")


def add(db: AcctDb, cmd: Command, immediate: bool, answer: str | None) -> Reply:
    lims, other = settings(cmd)
    names = tuple(n.lower() for n in cmd.names)
    if cmd.entity == "account":
        return _add_accounts(db, names, lims, other, immediate, answer)
    if cmd.entity == "user":
        return _add_users(db, names, lims, other, immediate, answer)
    if cmd.entity == "qos":
        return _add_qos(db, names, lims, other, immediate, answer)
    raise BadValue(f" Adding {cmd.entity} is not done here\n")


def _add_accounts(db, names, lims, other, immediate, answer) -> Reply:
    desc, org = other.get("description", "").lower(), other.get("organization", "").lower()
    parent = other.get("parent", "root").lower()
    done = ops.add_accounts(db, names, parent=parent, description=desc, organization=org,
                            settings=lims)
    out = " Adding Account(s)\n" + "".join(f"  {n}\n" for n in done.names) if done.names else ""
    if done.names:
        out += (" Settings\n" f"  Description     = {desc or 'Account Name'}\n"
                f"  Organization    = {org or 'Parent/Account Name'}\n")
    out += " Associations\n" + "".join(f"  A = {a.account:<10.10} C = {a.cluster:<10.10}\n"
                                       for a in done.assocs)
    if other or lims:
        out += f" Settings\n  Parent        = {parent}\n"
    reply = commit(db, done.db, out, immediate, answer)
    return attrs.evolve(reply, err=done.err, rc=1 if done.err else 0)


def _assoc_line(a) -> str:
    line = f"  U = {a.user:<9.9} A = {a.account:<10.10} C = {a.cluster:<10.10}"
    return line + (f" P = {a.partition:<10.10}\n" if a.partition else "\n")


def _add_users(db, names, lims, other, immediate, answer) -> Reply:
    accounts = tuple(a.lower() for a in other.get("accounts", "").split(",") if a)
    default = other.get("default_account", "").lower()
    admin = other.get("admin_level", "")
    done = ops.add_users(db, names, accounts, default_account=default, admin_level=admin,
                         partitions=tuple(p for p in other.get("partition", "").split(",") if p),
                         settings=lims)
    out = " Adding User(s)\n" + "".join(f"  {n}\n" for n in done.names) if done.names else ""
    if done.names and (default or admin):
        out += " Settings =\n"
        out += f"  Default Account = {default}\n" if default else ""
        out += f"  Admin Level     = {admin}\n" if admin else ""
    out += " Associations =\n" + "".join(_assoc_line(a) for a in done.assocs)
    out += " Non Default Settings\n"
    reply = commit(db, done.db, out, immediate, answer)
    return attrs.evolve(reply, err=done.err, rc=1 if done.err else 0)


def _qos_fields(lims: dict[str, str], other: dict[str, str]) -> dict[str, object]:
    fields: dict[str, object] = {}
    if "priority" in other:
        fields["priority"] = int(other["priority"])
    if "flags" in other:
        fields["flags"] = tuple(f for f in other["flags"].split(",") if f)
    if "usage_factor" in other:
        fields["usage_factor"] = float(other["usage_factor"])
    if "preempt_mode" in other:
        fields["preempt_mode"] = other["preempt_mode"].lower()
    return fields


def _add_qos(db, names, lims, other, immediate, answer) -> Reply:
    fields = _qos_fields(lims, other)
    description = other.get("description", "")
    done = ops.add_qos(db, names, description=description, limits=tuple(sorted(lims.items())),
                       **fields)
    out = " Adding QOS(s)\n" + "".join(f"  {n}\n" for n in done.names)
    out += f" Settings\n  Description    = {description or done.names[0]}\n"
    shown = {**{k: str(v) for k, v in fields.items()}, **lims}
    shown["flags"] = ",".join(fields.get("flags", ())) if "flags" in fields else ""  # type: ignore[arg-type]
    out += "".join(label + shown[key] + "\n" for key, label in QOS_LABELS if shown.get(key))
    return commit(db, done.db, out, immediate, answer)
