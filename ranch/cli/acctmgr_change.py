"""sacctmgr's modify and delete over an AcctDb, with their texts (account_functions.c,
user_functions.c, qos_functions.c: "Modified ...", "Deleting ...", "Nothing modified")."""

from __future__ import annotations

from ranch.assoc import ops
from ranch.assoc.db import AcctDb, Refused
from ranch.cli.acctmgr_parse import Command
from ranch.cli.acctmgr_show import filters, pick_assocs
from ranch.cli.acctmgr_verbs import Reply, _qos_fields, commit, settings


def _names(cmd: Command) -> list[str]:
    return [n.lower() for n in cmd.names]


def modify(db: AcctDb, cmd: Command, immediate: bool, answer: str | None) -> Reply:
    lims, other = settings(cmd)
    if not lims and not other:
        raise Refused(err=" You didn't give me anything to set\n")
    if cmd.entity == "qos":
        new, names = ops.modify_qos(db, _names(cmd), _qos_fields(lims, other), lims)
        return commit(db, new, " Modified qos...\n" + "".join(f"  {n}\n" for n in names),
                      immediate, answer)
    if cmd.entity == "user" and ("default_account" in other or "admin_level" in other):
        new, names = ops.modify_users(db, _names(cmd),
                                      default_account=other.get("default_account", "").lower(),
                                      admin_level=other.get("admin_level", ""))
        if not names:
            raise Refused(out=" Nothing modified\n")
        return commit(db, new, " Modified users...\n" + "".join(f"  {n}\n" for n in names),
                      immediate, answer)
    return _modify_assocs(db, cmd, lims, other, immediate, answer)


def _modify_assocs(db, cmd, lims, other, immediate, answer) -> Reply:
    want = filters(cmd)
    key = "user" if cmd.entity == "user" else "account"
    if cmd.names:
        want.setdefault(key, set()).update(_names(cmd))
    chosen = [a for a in pick_assocs(db, want) if (bool(a.user) == (cmd.entity == "user"))]
    shares = int(other["shares"]) if "shares" in other else None
    qos = tuple(q for q in other["qos"].split(",") if q) if "qos" in other else None
    new, changed = ops.modify_assocs(db, chosen, lims, shares=shares, qos=qos,
                                     def_qos=other.get("def_qos"))
    if not changed:
        raise Refused(out=" Nothing modified\n")
    if cmd.entity == "user":
        text = " Modified user associations...\n" + "".join(
            f"  C = {a.cluster:<10.10} A = {a.account:<20.20} U = {a.user:<9.9}\n"
            for a in new.hierarchy(changed))
    else:
        text = " Modified account associations...\n" + "".join(
            f"  C = {a.cluster:<10.10} A = {a.account} of {a.parent}\n"
            for a in new.hierarchy(changed))
    return commit(db, new, text, immediate, answer)


def delete(db: AcctDb, cmd: Command, immediate: bool, answer: str | None) -> Reply:
    names = _names(cmd) + sorted(filters(cmd).get("name", set()))
    if cmd.entity == "account":
        new, gone = ops.delete_accounts(db, names)
        head = " Deleting accounts...\n"
    elif cmd.entity == "user":
        new, gone = ops.delete_users(db, names)
        head = " Deleting users...\n"
    elif cmd.entity == "qos":
        new, gone = ops.delete_qos(db, names)
        head = " Deleting QOS(s)...\n"
    else:
        raise Refused(err=f" Deleting {cmd.entity} is not done here\n")
    return commit(db, new, head + "".join(f"  {n}\n" for n in gone), immediate, answer)


