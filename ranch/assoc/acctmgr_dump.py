"""sacctmgr's flat file (`dump` writes it, `load` reads it: cluster_functions.c
sacctmgr_dump_cluster, file_functions.c): one line per association, parents before children,
values as the association sets them itself (nothing inherited)."""

from __future__ import annotations

from ranch.assoc.acctmgr_values import minutes
from ranch.assoc.db import AcctDb
from ranch.assoc.records import Assoc

HEADER = (
    "# To edit this file start with a cluster line for the new cluster\n"
    "# Cluster - 'cluster_name':MaxTRESPerJob=node=50\n"
    "# Followed by Accounts you want in this fashion (root is created by default)...\n"
    "# Parent - 'root'\n"
    "# Account - 'cs':MaxTRESPerJob=node=5:MaxJobs=4:MaxTRESMinsPerJob=cpu=20:FairShare=399:"
    "MaxWallDurationPerJob=40:Description='Computer Science':Organization='LC'\n"
    "# Any of the options after a ':' can be left out and they can be in any order.\n"
    "# If you want to add any sub accounts just list the Parent THAT HAS ALREADY\n"
    "# BEEN CREATED before the account line in this fashion...\n"
    "# Parent - 'cs'\n"
    "# Account - 'test':MaxTRESPerJob=node=1:MaxJobs=1:MaxTRESMinsPerJob=cpu=1:FairShare=1:"
    "MaxWallDurationPerJob=1:Description='Test Account':Organization='Test'\n"
    "# To add users to a account add a line like this after a Parent - 'line'\n"
    "# User - 'lipari':MaxTRESPerJob=node=2:MaxJobs=3:MaxTRESMinsPerJob=cpu=4:FairShare=1:"
    "MaxWallDurationPerJob=1\n")
# print_file_add_limits_to_line's order: (the file's key, the model's limit name)
FILE_LIMITS = (("GrpTRESMins", "GrpTRESMins"), ("GrpTRESRunMins", "GrpTRESRunMins"),
               ("GrpTRES", "GrpTRES"), ("GrpJobs", "GrpJobs"),
               ("GrpSubmitJobs", "GrpSubmitJobs"), ("GrpWall", "GrpWall"),
               ("MaxTRESMinsPerJob", "MaxTRESMins"), ("MaxTRESPerJob", "MaxTRES"),
               ("MaxTRESPerNode", "MaxTRESPerNode"), ("MaxJobs", "MaxJobs"),
               ("MaxSubmitJobs", "MaxSubmitJobs"), ("MaxWallDurationPerJob", "MaxWall"),
               ("Priority", "Priority"))
WALLS = ("GrpWall", "MaxWall")


def limits_text(a: Assoc) -> str:
    line = f":DefaultQOS='{a.def_qos}'" if a.def_qos else ""
    line += f":Fairshare={a.shares}"
    for key, name in FILE_LIMITS:
        value = a.limit(name)
        if value:
            line += f":{key}={minutes(value) if name in WALLS else value}"
    return line + (f":QOS='{','.join(sorted(a.qos))}'" if a.qos else "")


def _line(db: AcctDb, a: Assoc) -> str:
    if a.user:
        user = db.user(a.user)
        line = f"User - '{a.user}'" + (f":Partition='{a.partition}'" if a.partition else "")
        if user is not None:
            # none: C's printf of a NULL, as sacctmgr writes it
            line += f":DefaultAccount='{user.default_account or '(null)'}'"
            if user.admin_level != "None":
                line += f":AdminLevel='{user.admin_level}'"
        return line + limits_text(a)
    acct = db.account(a.account)
    line = f"Account - '{a.account}'"
    if acct is not None:
        line += f":Description='{acct.description}':Organization='{acct.organization}'"
    return line + limits_text(a)


def dump_lines(db: AcctDb, cluster: str) -> list[str]:
    """The file's lines after its header (sacctmgr also logs each on stderr)."""
    root = db.base_assoc("root", cluster)
    if root is None:
        return []
    lines = [f"Cluster - '{cluster}'" + limits_text(root)]

    def block(a: Assoc) -> None:
        kids = sorted(db.children(a), key=lambda b: (0 if b.user else 1, b.user or b.account))
        if not kids:
            return
        lines.append(f"Parent - '{a.account}'")
        lines.extend(_line(db, k) for k in kids)
        for k in kids:
            block(k)
    block(root)
    return lines


def dump(db: AcctDb, words: tuple[tuple[str, str], ...]):
    """`sacctmgr dump CLUSTER [File=PATH]`: (stdout, stderr, exit status, files to write)."""
    cluster = path = ""
    err = ""
    for key, value in words:
        low = key.lower()
        if not key or "cluster".startswith(low):
            if cluster:
                err += f" Can only do one cluster at a time.  Already doing {cluster}\n"
                continue
            cluster = value
        elif "file".startswith(low):
            path = value
        else:
            err += f" Unknown option: {key}={value}\n"
    if err:
        return "", err, 1, ()
    if not cluster:
        return "", " We need a cluster to dump.\n", 1, ()
    if not any(c.name == cluster for c in db.clusters):
        return "", f" Cluster {cluster} doesn't exist.\n", 1, ()
    out = ""
    if not path:
        path = f"./{cluster}.cfg"
        out = f" No filename given, using {path}.\n"
    lines = dump_lines(db, cluster)
    return (out, "".join(f"sacctmgr: {line}\n" for line in lines), 0,
            ((path, HEADER + "".join(line + "\n" for line in lines)),))
