"""`sacctmgr load FILE`: the flat file `dump` writes, read back into an AcctDb (file_functions.c
load_sacctmgr_cfg_file): what the file has and the db lacks is added, with sacctmgr's tables
of what it adds. A line that would change a record the db already holds is refused (Ranch does
not yet mirror load's modify path; docs/slurm-compat.md)."""

from __future__ import annotations

import attrs

from ranch.assoc import ops
from ranch.assoc.acctmgr_ask import Reply, commit
from ranch.assoc.acctmgr_fields import columns, render
from ranch.assoc.acctmgr_values import BadValue, limit_key, limit_value, shares_text, shares_value
from ranch.assoc.db import AcctDb, Refused
from ranch.assoc.records import PRIORITY, Account, Assoc, User, limits

ASSOC_COLS = ("Share,GrpTRESM,GrpTRESR,GrpTRES,GrpJ,GrpJobsA,GrpMEM,GrpN,GrpS,GrpW,MaxTRESM,"
              "MaxTRES,MaxTRESPerN,MaxJ,MaxS,MaxN,MaxW,QOS,DefaultQOS")
FILE_KEYS = ("adminlevel", "defaultaccount", "description", "organization", "partition",
             "fairshare", "qos", "defaultqos")


@attrs.define
class Plan:
    """What the file adds, in its order (sacctmgr's lists)."""
    accounts: list[Account] = attrs.Factory(list)
    users: list[User] = attrs.Factory(list)
    acct_assocs: list[Assoc] = attrs.Factory(list)
    user_assocs: list[Assoc] = attrs.Factory(list)
    out: str = ""


def options(text: str) -> tuple[str, dict[str, str]]:
    """`'name':Key=Value:Key='value'` -> (name, {lower-case key: value})."""
    parts = text.split(":")
    name = parts[0].strip().strip("'\"")
    opts: dict[str, str] = {}
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        if not eq:
            raise BadValue(f" Bad format on {part}: End your option with an '=' sign\n")
        low = key.strip().lower()
        known = next((k for k in FILE_KEYS if k.startswith(low) and low), None)
        if low.startswith("pri") and "priority".startswith(low):
            known = PRIORITY  # an association's, kept with its limits
        opts[known or (limit_key(low) or low)] = value.strip().strip("'\"")
    return name, opts


def _assoc(cluster: str, account: str, opts: dict[str, str], user: str = "",
           parent: str = "") -> Assoc:
    lims = {}
    for key, value in opts.items():
        if key[0].isupper():
            lims[key] = limit_value(key, value)
        elif key not in FILE_KEYS:
            raise BadValue(f" Unknown option: {key}\n")
    return Assoc(0, cluster, account, user=user, partition=opts.get("partition", ""),
                 parent=parent, shares=shares_value(opts.get("fairshare", "1")),
                 limits=limits(lims),
                 qos=tuple(q for q in opts.get("qos", "").split(",") if q),
                 def_qos=opts.get("defaultqos", ""))


def _differs(old: Assoc, new: Assoc) -> bool:
    return (old.shares, old.limits, old.qos, old.def_qos) != (new.shares, new.limits, new.qos,
                                                              new.def_qos)


def _changed(what: str) -> Refused:
    return Refused(err=f" {what} differs from the database: changing records by load is not "
                       "done here yet; use modify\n")


def _account(db: AcctDb, plan: Plan, cluster: str, parent: str, name: str,
             opts: dict[str, str]) -> None:
    held = db.account(name)
    if held is not None or any(a.name == name for a in plan.accounts):
        old = db.base_assoc(name, cluster)
        if held is not None and (opts.get("description", held.description),
                                 opts.get("organization", held.organization)) != (
                held.description, held.organization):
            raise _changed(f"Account '{name}'")
        if old is not None:
            if _differs(old, _assoc(cluster, name, opts, parent=parent)) or old.parent != parent:
                raise _changed(f"Account '{name}'")
            return  # held as the file has it
    else:
        org = opts.get("organization") or (parent if parent != "root" else name)
        plan.accounts.append(Account(name, opts.get("description", name), org))
    plan.acct_assocs.append(_assoc(cluster, name, opts, parent=parent))


def _user(db: AcctDb, plan: Plan, cluster: str, parent: str, name: str,
          opts: dict[str, str]) -> None:
    held = db.user(name)
    if held is None and not any(u.name == name for u in plan.users):
        plan.users.append(User(name, opts.get("defaultaccount", ""),
                               opts.get("adminlevel", "Not Set")))
    elif held is not None and (opts.get("defaultaccount", held.default_account),
                               opts.get("adminlevel", held.admin_level)) != (
            held.default_account, held.admin_level):
        raise _changed(f"User '{name}'")
    new = _assoc(cluster, parent, opts, user=name)
    old = db.find_assoc(cluster, parent, name, new.partition)
    if old is None:
        plan.user_assocs.append(new)
    elif _differs(old, new):
        raise _changed(f"User '{name}' in account '{parent}'")


def plan_file(db: AcctDb, text: str) -> tuple[str, Plan]:
    cluster, parent, plan = "", "", Plan()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        obj, dash, rest = line.partition(" - ")
        if not dash:
            raise Refused(err=f" Misformatted line({n}): {raw}\n")
        name, opts = options(rest)
        kind = obj.strip().lower()
        if kind == "cluster":
            cluster = name
            plan.out += f"For cluster {cluster}\n"
            if db.base_assoc("root", cluster) is None:
                raise Refused(err=f" Loading cluster {cluster} that the db lacks is rctld's\n")
        elif not cluster:
            raise Refused(err=" You need to specify a cluster name first with 'Cluster - "
                              "$NAME' in your file\n")
        elif kind == "parent":
            parent = name
            if db.base_assoc(parent, cluster) is None and not any(
                    a.account == parent for a in plan.acct_assocs):
                raise Refused(err=f" line({n}) You need to add this parent ({parent}) as a "
                                  "child before you can add children to it.\n")
        elif kind in ("account", "project", "user"):
            if not parent:
                parent = "root"
                plan.out += (" No parent given creating off root, If incorrect specify "
                             "'Parent - name' before any children in your file\n")
            add = _account if kind != "user" else _user
            add(db, plan, cluster, parent, name, opts)
        else:
            raise Refused(err=f" Misformatted line({n}): {raw}\n")
    return cluster, plan


def _tables(db: AcctDb, plan: Plan) -> str:
    out = ""
    if plan.accounts:
        cols = columns("Name,Description,Organization,QOS".split(","))
        out += "Accounts\n" + render(cols, [[a.name, a.description, a.organization, ""]
                                            for a in plan.accounts]) + "-" * 51 + "\n\n"
    out += _assoc_table(db, "Account Associations", "Account,ParentName", plan.acct_assocs)
    if plan.users:
        cols = columns("Name,DefaultA,DefaultW,QOS,Admin,Coord".split(","))
        out += "Users\n" + render(cols, [[u.name, u.default_account, "", "", u.admin_level, ""]
                                         for u in plan.users]) + "-" * 51 + "\n\n"
    return out + _assoc_table(db, "User Associations", "User,Account", plan.user_assocs)


def _assoc_table(db: AcctDb, title: str, head: str, assocs: list[Assoc]) -> str:
    if not assocs:
        return ""
    cols = columns((head + "," + ASSOC_COLS).split(","))
    cells = {"acct": lambda a: a.account, "pname": lambda a: a.parent, "user": lambda a: a.user,
             "share": lambda a: shares_text(a.shares), "qos": lambda a: ",".join(a.qos),
             "dqos": lambda a: a.def_qos}
    rows = [[cells[c.kind](a) if c.kind in cells else _own(a, c.kind) for c in cols]
            for a in assocs]
    return f"{title}\n" + render(cols, rows) + "-" * 62 + "\n\n"


def _own(a: Assoc, kind: str) -> str:
    """An association's own value for a column (the file's records inherit nothing yet)."""
    name, _, tres = kind.partition(":")
    value = a.limit({"maxj": "MaxJobs", "maxs": "MaxSubmitJobs"}.get(name, name))
    if tres:
        return dict(p.split("=", 1) for p in value.split(",") if "=" in p).get(tres, "")
    return value


def load(db: AcctDb, text: str, immediate: bool, stdin: str | None) -> Reply:
    _, plan = plan_file(db, text)
    if not (plan.accounts or plan.users or plan.acct_assocs or plan.user_assocs):
        return Reply(db, plan.out + " Nothing new added.\n", rc=0)
    users = [attrs.evolve(u, admin_level="None") if u.admin_level == "Not Set" else u
             for u in plan.users]
    new = ops.load(db, plan.accounts, users, plan.acct_assocs, plan.user_assocs)
    reply = commit(db, new, plan.out + _tables(db, plan), immediate, stdin)
    return attrs.evolve(reply, err="sacctmgr: Done adding cluster in usec=0\n")
