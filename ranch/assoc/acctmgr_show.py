"""sacctmgr's `show|list` over an AcctDb: rows, where filters, default columns per entity,
withassoc and tree (account_functions.c, user_functions.c, association_functions.c, ...)."""

from __future__ import annotations

from ranch.assoc.acctmgr_fields import Column, columns, render
from ranch.assoc.acctmgr_parse import Command, match
from ranch.assoc.acctmgr_values import assoc_cell, qos_cell, user_cell
from ranch.assoc.db import AcctDb
from ranch.assoc.records import Assoc

ASSOC = ("Cluster,Account,User,Partition,Share,Priority,GrpJobs,GrpTRES,GrpSubmit,GrpWall,"
         "GrpTRESMins,MaxJobs,MaxTRES,MaxTRESPerNode,MaxSubmit,MaxWall,MaxTRESMins,QOS,"
         "DefaultQOS,GrpTRESRunMins")
USER, USER_ASSOC = "User,DefaultAccount,Admin", (
    "Cluster,Account,Partition,Share,Priority,MaxJobs,MaxNodes,MaxCPUs,MaxSubmit,MaxWall,"
    "MaxCPUMins,QOS,DefaultQOS")
ACCOUNT, ACCOUNT_ASSOC = "Account,Description,Organization", (
    "Cluster,ParentName,User,Share,Priority,GrpJobs,GrpNodes,GrpCPUs,GrpMem,GrpSubmit,GrpWall,"
    "GrpCPUMins,MaxJobs,MaxNodes,MaxCPUs,MaxSubmit,MaxWall,MaxCPUMins,QOS,DefaultQOS")
QOS = ("Name,Priority,GraceTime,Preempt,PreemptExemptTime,PreemptMode,Flags%40,UsageThres,"
       "UsageFactor,GrpTRES,GrpTRESMins,GrpTRESRunMins,GrpJobs,GrpSubmit,GrpWall,MaxTRES,"
       "MaxTRESPerNode,MaxTRESMins,MaxWall,MaxTRESPU,MaxJobsPU,MaxSubmitPU,MaxTRESPA,MaxJobsPA,"
       "MaxSubmitPA,MinTRES")
CLUSTER = ("Cluster,ControlHost,ControlPort,RPC,Share,GrpJobs,GrpTRES,GrpSubmit,MaxJobs,MaxTRES,"
           "MaxSubmit,MaxWall,QOS,DefaultQOS")
WHERE_KEYS = (("accounts", 2, "account"), ("acct", 4, "account"), ("clusters", 1, "cluster"),
              ("users", 1, "user"), ("partitions", 3, "partition"), ("names", 1, "name"),
              ("parent", 3, "parent"))


def filters(cmd: Command) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key, value in cmd.where:
        canon = match(key, WHERE_KEYS) or key.lower()
        out.setdefault(canon, set()).update(v for v in value.split(",") if v)
    return out


def pick_assocs(db: AcctDb, want: dict[str, set[str]]) -> list[Assoc]:
    def ok(a: Assoc) -> bool:
        return all(not want.get(k) or v in want[k] for k, v in (
            ("account", a.account), ("cluster", a.cluster), ("user", a.user),
            ("partition", a.partition), ("parent", a.parent)))
    return [a for a in db.assocs if ok(a)]


def _tree_name(db: AcctDb, a: Assoc) -> str:
    depth, node = 0, db.parent_of(a)
    while node is not None:
        depth, node = depth + 1, db.parent_of(node)
    return " " * depth + a.account


def show(db: AcctDb, cmd: Command, header: bool, parsable: str) -> str:
    want = filters(cmd)
    if cmd.names:
        want.setdefault({"user": "user", "account": "account", "cluster": "cluster"}.get(
            cmd.entity, "name"), set()).update(cmd.names)
    if cmd.entity == "assoc":
        cols = columns(cmd.format or ASSOC.split(","), tree=cmd.tree)
        rows = [[_tree_name(db, a) if cmd.tree and c.kind == "acct" else assoc_cell(db, a, c.kind)
                 for c in cols] for a in db.hierarchy(pick_assocs(db, want))]
    elif cmd.entity == "user":
        rows, cols = _users(db, cmd, want)
    elif cmd.entity == "account":
        rows, cols = _accounts(db, cmd, want)
    elif cmd.entity == "qos":
        cols = columns(cmd.format or QOS.split(","))
        rows = [[qos_cell(q, c.kind, db) for c in cols] for q in db.qos
                if not want.get("name") or q.name in want["name"]]
    else:
        cols = columns(cmd.format or CLUSTER.split(","))
        rows = []
        for cl in db.clusters:
            if want.get("cluster") and cl.name not in want["cluster"]:
                continue
            root = db.base_assoc("root", cl.name)
            rows.append([cl.name if c.kind == "cluster" else
                         assoc_cell(db, root, c.kind) if root and c.kind not in (
                             "chost", "cport", "rpc") else "" for c in cols])
    return render(cols, rows, header=header, parsable=parsable)


def _users(db: AcctDb, cmd: Command, want: dict[str, set[str]]
           ) -> tuple[list[list[str]], list[Column]]:
    spec = cmd.format or (USER.split(",") + (USER_ASSOC.split(",") if cmd.withassoc else []))
    cols = columns(spec)
    rows = []
    lft = db.lft_order()
    for u in sorted(db.users, key=lambda u: u.name):
        if want.get("user") and u.name not in want["user"]:
            continue
        assocs = [a for a in lft if a.user == u.name] if cmd.withassoc else []
        for a in assocs or [None]:  # type: ignore[list-item]  # a user with no association
            rows.append([_user_cell(db, u, a, c.kind) for c in cols])
    return rows, cols


def _user_cell(db, u, a: Assoc | None, kind: str) -> str:
    value = user_cell(u, kind)
    if value is not None:
        return value
    return assoc_cell(db, a, kind) if a is not None else ""


def _accounts(db: AcctDb, cmd: Command, want: dict[str, set[str]]
              ) -> tuple[list[list[str]], list[Column]]:
    spec = cmd.format or (ACCOUNT.split(",") + (ACCOUNT_ASSOC.split(",") if cmd.withassoc else []))
    cols = columns(spec)
    rows = []
    lft = db.lft_order()
    for acct in sorted(db.accounts, key=lambda a: a.name):
        if want.get("account") and acct.name not in want["account"]:
            continue
        assocs = [a for a in lft if a.account == acct.name] if cmd.withassoc else []
        for a in assocs or [None]:  # type: ignore[list-item]  # an account with none
            cells = {"acct": acct.name, "desc": acct.description, "org": acct.organization}
            rows.append([cells[c.kind] if c.kind in cells else
                         assoc_cell(db, a, c.kind) if a is not None else "" for c in cols])
    return rows, cols
