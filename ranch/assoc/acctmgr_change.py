"""sacctmgr's modify and delete over an AcctDb, with their texts (account_functions.c,
user_functions.c, qos_functions.c: "Modified ...", "Deleting ...", "Nothing modified")."""

from __future__ import annotations

from ranch.assoc import ops
from ranch.assoc.acctmgr_ask import Reply, commit
from ranch.assoc.acctmgr_parse import Command
from ranch.assoc.acctmgr_qos import qos_fields
from ranch.assoc.acctmgr_show import filters, pick_assocs
from ranch.assoc.acctmgr_values import shares_value
from ranch.assoc.acctmgr_verbs import check_qos, settings
from ranch.assoc.db import AcctDb, Refused
from ranch.assoc.records import INHERITED, Assoc


def _names(cmd: Command) -> list[str]:
    return [n.lower() for n in cmd.names] + sorted(filters(cmd).get("name", set()))


DENIED = ("sacctmgr: error: Your user doesn't have privilege to perform this action\n"
          " Error with request: Access/permission denied\n")


UNAFFECTED = ("sacctmgr: accounting_storage/slurmdbd: acct_storage_p_modify_assocs: Request "
              "didn't affect anything or your user doesn't have privilege to perform this "
              "action\n")


def _check(db: AcctDb, cmd: Command, caller: str, assocs: bool = False) -> None:
    if ops.may(db, caller, "Administrator" if cmd.entity == "qos" else "Operator"):
        return
    if assocs and cmd.entity == "user" and _names(cmd) == [caller]:
        # slurmdbd lets a user at their own associations, for their default account and QOS
        # only: a limit there changes nothing (as_mysql_modify_assocs)
        raise Refused(out=" Nothing modified\n", err=UNAFFECTED)
    raise Refused(err=DENIED)


def modify(db: AcctDb, cmd: Command, immediate: bool, stdin: str | None,
           caller: str = "root") -> Reply:
    lims, other = settings(cmd)
    if cmd.entity != "qos":
        check_qos(db, other, cmd.sets)
    if not lims and not other:
        raise Refused(err=" You didn't give me anything to set\n")
    _check(db, cmd, caller, assocs=cmd.entity != "qos" and not (
        "default_account" in other or "admin_level" in other))
    if cmd.entity == "qos":
        fields, warn = qos_fields(db, other)
        new, names = ops.modify_qos(db, _names(cmd), fields, lims)
        reply = commit(db, new, " Modified qos...\n" + "".join(f"  {n}\n" for n in names),
                       immediate, stdin)
        return Reply(reply.db, reply.out, warn, reply.rc, reply.stdin)
    if cmd.entity == "user" and other.get("admin_level") == "" and len(other) == 1 and not lims:
        raise Refused(out=" Nothing modified\n", err=UNAFFECTED.replace("assocs", "users"))
    if cmd.entity == "user" and ("default_account" in other or "admin_level" in other):
        new, names = ops.modify_users(db, _names(cmd),
                                      default_account=other.get("default_account", "").lower(),
                                      admin_level=other.get("admin_level", ""))
        if not names:
            raise Refused(out=" Nothing modified\n")
        return commit(db, new, " Modified users...\n" + "".join(f"  {n}\n" for n in names),
                      immediate, stdin)
    if cmd.entity == "account" and ("description" in other or "organization" in other):
        return _modify_accounts(db, cmd, lims, other, immediate, stdin)
    return _modify_assocs(db, cmd, lims, other, immediate, stdin)


def _modify_accounts(db, cmd, lims, other, immediate, stdin) -> Reply:
    """Description/Organization change the account records; limits besides, its associations."""
    new, names = ops.modify_accounts(db, _names(cmd), other.get("description", "").lower(),
                                     other.get("organization", "").lower())
    text = " Modified accounts...\n" + "".join(f"  {n}\n" for n in names)
    rest = {k: v for k, v in other.items() if k not in ("description", "organization")}
    if lims or rest:
        after = _modify_assocs(new, cmd, lims, rest, True, None)
        return commit(db, after.db, text + after.out, immediate, stdin)
    return commit(db, new, text, immediate, stdin)


def user_line(a: Assoc) -> str:
    line = f"  C = {a.cluster:<10.10} A = {a.account:<20.20} U = {a.user:<9.9}"
    return line + (f" P = {a.partition}\n" if a.partition else "\n")


def _modify_assocs(db, cmd, lims, other, immediate, stdin) -> Reply:
    want = {k: v for k, v in filters(cmd).items() if k != "name"}
    key = "user" if cmd.entity == "user" else "account"
    if _names(cmd):
        want.setdefault(key, set()).update(_names(cmd))
    chosen = [a for a in pick_assocs(db, want) if (bool(a.user) == (cmd.entity == "user"))]
    shares = shares_value(other["shares"]) if "shares" in other else None
    denied = _no_default_access(db, chosen, other)
    if denied:
        return Reply(db, err=denied)
    new, changed = db, []
    for a in chosen:  # QOS+= and QOS-= act on each association's own list
        new, done = ops.modify_assocs(new, [new.find_assoc(a.cluster, a.account, a.user,
                                                           a.partition) or a], lims,
                                      shares=shares, qos=_qos_list(db, a, other),
                                      def_qos=other.get("def_qos"))
        changed += done
    if not changed:
        raise Refused(out=" Nothing modified\n")
    if cmd.entity == "user":
        text = " Modified user associations...\n" + "".join(
            user_line(a) for a in new.hierarchy(changed))
        return commit(db, new, text, immediate, stdin)
    passed = ({k for k in lims if k in INHERITED} | {k for k in ("qos", "def_qos") if k in other})
    text = " Modified account associations...\n"
    for a in new.hierarchy(changed):
        text += f"  C = {a.cluster:<10.10} A = {a.account}" + (
            f" of {a.parent}\n" if a.parent else "\n")
        text += "".join(user_line(u) for u in new.inheritors(a, passed)) if passed else ""
    return commit(db, new, text, immediate, stdin)


def delete(db: AcctDb, cmd: Command, immediate: bool, stdin: str | None,
           caller: str = "root") -> Reply:
    _check(db, cmd, caller)
    names = _names(cmd)
    if cmd.entity == "user" and set(filters(cmd)) - {"name", "user"}:
        return _delete_user_assocs(db, cmd, names, immediate, stdin)
    if cmd.entity == "account":
        new, gone = ops.delete_accounts(db, names)
        head = " Deleting accounts...\n"
    elif cmd.entity == "user":
        new, gone = ops.delete_users(db, names)
        head = " Deleting users...\n"
    else:
        new, gone = ops.delete_qos(db, names)
        head = " Deleting QOS(s)...\n"
    return commit(db, new, head + "".join(f"  {n}\n" for n in gone), immediate, stdin)


def _delete_user_assocs(db: AcctDb, cmd: Command, names: list[str], immediate: bool,
                        stdin: str | None) -> Reply:
    want = {k: v for k, v in filters(cmd).items() if k != "name"}
    if names:
        want.setdefault("user", set()).update(names)
    chosen = db.hierarchy(a for a in pick_assocs(db, want) if a.user)
    new, gone, bare = ops.delete_user_assocs(db, chosen)
    text = " Deleting user associations...\n" + "".join(
        f"  C = {a.cluster:<10.10} A = {a.account:<10.10} U = {a.user:<9.9}"
        + (f" P = {a.partition}\n" if a.partition else "\n") for a in gone)
    if bare:
        text += " Deleting users (No Associations)...\n" + "".join(f"  {n}\n" for n in bare)
    return commit(db, new, text, immediate, stdin)


def _qos_list(db: AcctDb, a: Assoc, other: dict[str, str]) -> tuple[str, ...] | None:
    if not any(k in other for k in ("qos", "qos+", "qos-")):
        return None
    names = list(db.effective_qos(a))
    if "qos" in other:
        names = [q for q in other["qos"].split(",") if q]
    names += [q for q in other.get("qos+", "").split(",") if q and q not in names]
    return tuple(sorted(q for q in names if q not in other.get("qos-", "").split(",")))


def _no_default_access(db: AcctDb, chosen: list[Assoc], other: dict[str, str]) -> str:
    """A DefaultQOS an association may not use is refused, naming each (association_functions.c
    sacctmgr_check_default_qos; exit status 0, as sacctmgr's)."""
    q = other.get("def_qos", "")
    if not q:
        return ""
    lines = ""
    for a in chosen:
        if q in (_qos_list(db, a, other) or db.effective_qos(a)):
            continue
        lines += f"  DefQOS = {q:<10} C = {a.cluster:<10} A = {a.account:<20} "
        if a.user:
            lines += f"U = {a.user:<9}" + (f" P = {a.partition}" if a.partition else "")
        lines += "\n"
    if not lines:
        return ""
    return (" These associations don't have access to their default qos.\n Please give them "
            "access before they the default can be set to this.\n" + lines)
