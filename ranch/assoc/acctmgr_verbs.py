"""sacctmgr's add over an AcctDb: the `set` words to the model, and the confirmation texts
(account_functions.c, user_functions.c, qos_functions.c; common.c's limit printers)."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from ranch.assoc import ops
from ranch.assoc.acctmgr_ask import Reply, ask, commit
from ranch.assoc.acctmgr_parse import Command, match
from ranch.assoc.acctmgr_qos import add_qos
from ranch.assoc.acctmgr_values import BadValue, admin_level, limit_key, limit_value, shares_value
from ranch.assoc.db import AcctDb, Refused
from ranch.assoc.records import PRIORITY

# sacctmgr_print_assoc_limits' labels, in its order
ASSOC_LABELS = (("shares", "Fairshare     = "), ("GrpJobs", "GrpJobs       = "),
                ("GrpSubmitJobs", "GrpSubmitJobs = "), ("GrpTRES", "GrpTRES       = "),
                ("GrpTRESMins", "GrpTRESMins   = "), ("GrpTRESRunMins", "GrpTRESRunMins= "),
                ("GrpWall", "GrpWall       = "), ("MaxJobs", "MaxJobs       = "),
                ("MaxSubmitJobs", "MaxSubmitJobs = "), ("MaxTRES", "MaxTRES       = "),
                ("MaxTRESPerNode", "MaxTRESPerNode= "), ("MaxTRESMins", "MaxTRESMins   = "),
                ("MaxWall", "MaxWall       = "), ("parent", "Parent        = "),
                (PRIORITY, "Priority      = "), ("qos", "QOS           = "),
                ("def_qos", "DefQOS        = "))
OTHER_KEYS = (("description", 1, "description"), ("organization", 1, "organization"),
              ("parent", 3, "parent"), ("defaultaccount", 3, "default_account"),
              ("adminlevel", 2, "admin_level"), ("accounts", 2, "accounts"),
              ("partitions", 3, "partition"), ("clusters", 2, "clusters"),
              ("fairshare", 1, "shares"), ("shares", 1, "shares"), ("qoslevel", 3, "qos"),
              ("defaultqos", 3, "def_qos"), ("priority", 3, "priority"), ("flags", 1, "flags"),
              ("usagefactor", 6, "usage_factor"), ("preemptmode", 8, "preempt_mode"),
              ("preempt", 7, "preempt"), ("gracetime", 3, "grace_time"),
              ("usagethreshold", 6, "usage_threshold"),
              ("preemptexempttime", 8, "preempt_exempt_time"))


def settings(cmd: Command) -> tuple[dict[str, str], dict[str, str]]:
    """The `set` words: (limits by canonical name, other fields by model name)."""
    lims: dict[str, str] = {}
    other: dict[str, str] = {}
    for key, value in cmd.sets:
        name = limit_key(key)
        if name is not None:
            try:
                lims[name] = limit_value(name, value)
            except BadValue as exc:  # sacctmgr's words: the QOS's own, the association's
                text = str(exc) + (f"{key}={value}\n" if str(exc).startswith(" Bad") else "")
                if cmd.entity == "qos" and text.startswith(" Bad"):
                    raise BadValue(text) from None
                raise BadValue(text + f" Unknown option: {key}={value}\n Use keyword 'where' "
                               "to modify condition\n") from None
            continue
        sign = key[-1] if key.endswith(("+", "-")) else ""  # QOS+=x, QOS-=x
        field = match(key[:-1] if sign else key, OTHER_KEYS)
        if field is None or (sign and field != "qos"):
            raise BadValue(f" Unknown option: {key}={value}\n Use keyword 'where' to modify "
                           "condition\n")
        if field == "shares" and not (value.isdigit() or value.lower() == "parent"):
            raise BadValue(f"sacctmgr: error: Invalid value for FairShare ({value})\n Unknown "
                           f"option: {key}={value}\n Use keyword 'where' to modify condition\n")
        if field == "shares":
            value = value.lower()
        if field == "priority" and cmd.entity != "qos":  # an association's: kept as a limit
            lims[PRIORITY] = _priority(key, value)
            continue
        if field == "admin_level":
            value = admin_level(value)  # "" when sacctmgr cannot read it: not set
        other[field + sign] = value
    return lims, other


def _priority(key: str, value: str) -> str:
    """An association's Priority as get_uint reads it: a negative number clears it."""
    text = value.strip()
    if text.startswith("-") and text[1:].isdigit():
        return ""
    try:
        return limit_value(PRIORITY, text)
    except BadValue as exc:
        raise BadValue(str(exc) + f" Unknown option: {key}={value}\n Use keyword 'where' to "
                       "modify condition\n") from None


def check_qos(db: AcctDb, other: dict[str, str], sets: tuple[tuple[str, str], ...]) -> None:
    """QOS names must exist (slurmdb_defs.c str_2_slurmdb_qos, sacctmgr's words)."""
    for (key, value), field in zip(sets, [match(k.rstrip("+-"), OTHER_KEYS) for k, _ in sets],
                                   strict=True):
        if field == "qos":
            bad = next((q for q in value.split(",") if q and db.qos_named(q) is None), None)
            if bad is not None:
                valid = ",".join(q.name for q in sorted(db.qos, key=lambda q: q.id))
                raise BadValue(f"sacctmgr: error: You gave a bad qos '{bad}'. Valid QOS's are "
                               f"{valid}\n Unknown option: {key}={value}\n Use keyword 'where'"
                               " to modify condition\n")
    if "def_qos" in other and other["def_qos"] and db.qos_named(other["def_qos"]) is None:
        raise BadValue(f"You gave a bad default qos '{other['def_qos']}'.  Use 'list qos' to get "
                       "complete list.\n")


def assoc_settings(lims: dict[str, str], other: dict[str, str], parent: str = "") -> str:
    shown: dict[str, str] = dict(lims)
    shown.update({k: other[k] for k in ("shares", "qos", "def_qos") if k in other})
    if parent:
        shown["parent"] = parent
    return "".join(f"  {label}{shown[key]}\n" for key, label in ASSOC_LABELS if shown.get(key))


def add(db: AcctDb, cmd: Command, immediate: bool, stdin: str | None,
        known_user: Callable[[str], bool], caller: str = "root") -> Reply:
    lims, other = settings(cmd)
    if cmd.entity != "qos":
        check_qos(db, other, cmd.sets)
    names = tuple(n.lower() for n in cmd.names)
    if cmd.entity not in ("account", "user", "qos"):
        raise Refused(err=f" Adding a {cmd.entity} is rctld's (its cluster.conf)\n")
    what = {"account": "accounts", "user": "users", "qos": "QOS"}[cmd.entity]
    if not ops.may(db, caller, "Administrator" if what == "QOS" else "Operator"):
        # slurmdbd refuses once sacctmgr has said what it would add: nothing is asked
        probe = _add(db, cmd.entity, names, lims, other, True, None, lambda name: True)
        if probe.db is not db:
            return Reply(db, probe.out, probe.err +
                         f" Problem adding {what}: Access/permission denied\n", 1)
        return probe
    return _add(db, cmd.entity, names, lims, other, immediate, stdin, known_user)


def _assoc_extra(other: dict[str, str]) -> dict:
    """Fairshare, QOS and DefaultQOS for new associations."""
    return {"shares": shares_value(other.get("shares", "1")),
            "qos": tuple(q for q in other.get("qos", "").split(",") if q),
            "def_qos": other.get("def_qos", "")}


def _clusters(db: AcctDb, other: dict[str, str]) -> tuple[str, ...]:
    """Cluster= names, each one the db holds (sacctmgr_validate_cluster_list)."""
    names = tuple(c.lower() for c in other.get("clusters", "").split(",") if c)
    for name in names:
        if not any(c.name == name for c in db.clusters):
            raise Refused(err=f" This cluster '{name}' doesn't exist.\n        Contact your "
                              "admin to add it to accounting.\n")
    return names


def _add(db, entity, names, lims, other, immediate, stdin, known_user) -> Reply:
    if entity == "account":
        return _add_accounts(db, names, lims, other, immediate, stdin)
    if entity == "user":
        return _add_users(db, names, lims, other, immediate, stdin, known_user)
    return add_qos(db, names, lims, other, immediate, stdin)


def _add_accounts(db, names, lims, other, immediate, stdin) -> Reply:
    desc, org = other.get("description", "").lower(), other.get("organization", "").lower()
    parent = other.get("parent", "root").lower()
    done = ops.add_accounts(db, names, parent=parent, description=desc, organization=org,
                            settings=lims, clusters=_clusters(db, other), **_assoc_extra(other))
    out = " Adding Account(s)\n" + "".join(f"  {n}\n" for n in done.names) if done.names else ""
    if done.names:
        out += (" Settings\n" f"  Description     = {desc or 'Account Name'}\n"
                f"  Organization    = {org or 'Parent/Account Name'}\n")
    out += " Associations\n" + "".join(f"  A = {a.account:<10.10} C = {a.cluster:<10.10}\n"
                                       for a in done.assocs)
    if other or lims:
        out += " Settings\n" + assoc_settings(lims, other, parent)
    reply = commit(db, done.db, out, immediate, stdin)
    return attrs.evolve(reply, err=done.err, rc=1 if done.err else 0)


def assoc_line(a) -> str:
    line = f"  U = {a.user:<9.9} A = {a.account:<10.10} C = {a.cluster:<10.10}"
    return line + (f" P = {a.partition:<10.10}\n" if a.partition else "\n")


def _add_users(db, names, lims, other, immediate, stdin, known_user) -> Reply:
    accounts = tuple(a.lower() for a in other.get("accounts", "").split(",") if a)
    default = other.get("default_account", "").lower()
    admin = other.get("admin_level", "")
    asked = ""
    for name in names:  # sacctmgr asks before it adds a user the system does not know
        if not immediate and db.user(name) is None and not known_user(name):
            text, yes, stdin = ask(f"There is no uid for user '{name}'\nAre you sure you want "
                                   "to continue?", stdin)
            asked += text
            if not yes:
                return Reply(db, asked, rc=1, stdin=stdin)
    done = ops.add_users(db, names, accounts, default_account=default, admin_level=admin,
                         partitions=tuple(p for p in other.get("partition", "").split(",") if p),
                         settings=lims, clusters=_clusters(db, other), **_assoc_extra(other))
    out = " Adding User(s)\n" + "".join(f"  {n}\n" for n in done.names) if done.names else ""
    if done.names and (default or admin):
        out += " Settings =\n"
        out += f"  Default Account = {default}\n" if default else ""
        out += f"  Admin Level     = {admin}\n" if admin else ""
    out += " Associations =\n" + "".join(assoc_line(a) for a in done.assocs)
    if lims or set(other) - {"default_account", "admin_level"}:  # sacctmgr's limit_set
        out += " Non Default Settings\n" + assoc_settings(lims, other)
    reply = commit(db, done.db, asked + out, immediate, stdin)
    return attrs.evolve(reply, err=done.err, rc=1 if done.err else 0)
