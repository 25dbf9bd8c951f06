"""sacctmgr's columns (common.c _get_print_field: the name's shortest prefix, its header and
width) and print_fields.c's table, -p and -P rendering."""

from __future__ import annotations

import attrs

# (spelling, least letters), header, width, kind: in _get_print_field's order, which matters
FIELDS: tuple[tuple[tuple[tuple[str, int], ...], str, int, str], ...] = (
    ((("Account", 3), ("Acct", 4)), "Account", 10, "acct"),
    ((("AdminLevel", 2),), "Admin", 9, "admin"),
    ((("Clusters", 2),), "Cluster", 10, "cluster"),
    ((("Coordinators", 2),), "Coord Accounts", 20, "none"),
    ((("ControlHost", 8),), "ControlHost", 15, "chost"),
    ((("ControlPort", 8),), "ControlPort", 12, "cport"),
    ((("DefaultAccount", 8),), "Def Acct", 10, "dacct"),
    ((("DefaultQOS", 8),), "Def QOS", 9, "dqos"),
    ((("DefaultWCKey", 8),), "Def WCKey", 10, "none"),
    ((("Description", 3),), "Descr", 20, "desc"),
    ((("Flags", 2),), "Flags", 20, "flags"),
    ((("GraceTime", 3),), "GraceTime", 10, "grace"),
    ((("GrpCPUs", 6),), "GrpCPUs", 8, "GrpTRES:cpu"),
    ((("GrpCPUMins", 7),), "GrpCPUMins", 11, "GrpTRESMins:cpu"),
    ((("GrpTRES", 7),), "GrpTRES", 13, "GrpTRES"),
    ((("GrpTRESMins", 7),), "GrpTRESMins", 13, "GrpTRESMins"),
    ((("GrpTRESRunMins", 7),), "GrpTRESRunMins", 13, "GrpTRESRunMins"),
    ((("GrpJobs", 4),), "GrpJobs", 7, "GrpJobs"),
    ((("GrpJobsAccrue", 8),), "GrpJobsAccrue", 13, "none"),
    ((("GrpMemory", 4),), "GrpMem", 7, "GrpTRES:mem"),
    ((("GrpNodes", 4),), "GrpNodes", 8, "GrpTRES:node"),
    ((("GrpSubmitJobs", 4),), "GrpSubmit", 9, "GrpSubmitJobs"),
    ((("GrpWall", 4),), "GrpWall", 11, "GrpWall"),
    ((("ID", 2),), "ID", 6, "id"),
    ((("MaxCPUMinsPerJob", 7),), "MaxCPUMins", 11, "MaxTRESMins:cpu"),
    ((("MaxCPUsPerJob", 7),), "MaxCPUs", 8, "MaxTRES:cpu"),
    ((("MaxTRES", 7), ("MaxTRESPerJob", 11)), "MaxTRES", 13, "MaxTRES"),
    ((("MaxTRESPerNode", 11),), "MaxTRESPerNode", 14, "MaxTRESPerNode"),
    ((("MaxTRESMinsPerJob", 8),), "MaxTRESMins", 13, "MaxTRESMins"),
    ((("MaxTRESPerAccount", 11), ("MaxTRESPerAcct", 11), ("MaxTRESPA", 9)), "MaxTRESPA", 13,
     "MaxTRESPerAccount"),
    ((("MaxTRESPerUser", 11), ("MaxTRESPU", 9)), "MaxTRESPU", 13, "MaxTRESPerUser"),
    ((("MaxJobs", 4),), "MaxJobs", 7, "maxj"),
    ((("MaxJobsPerAccount", 11), ("MaxJobsPerAcct", 11), ("MaxJobsPA", 9)), "MaxJobsPA", 9,
     "MaxJobsPerAccount"),
    ((("MaxJobsPerUser", 11), ("MaxJobsPU", 9)), "MaxJobsPU", 9, "maxj"),
    ((("MaxNodesPerJob", 4),), "MaxNodes", 8, "MaxTRES:node"),
    ((("MaxSubmitJobs", 4),), "MaxSubmit", 9, "maxs"),
    ((("MaxSubmitJobsPerAccount", 17), ("MaxSubmitJobsPerAcct", 17), ("MaxSubmitJobsPA", 15),
      ("MaxSubmitPA", 11)), "MaxSubmitPA", 11, "MaxSubmitJobsPerAccount"),
    ((("MaxSubmitJobsPerUser", 10), ("MaxSubmitJobsPU", 10), ("MaxSubmitPU", 6)), "MaxSubmitPU",
     11, "maxs"),
    ((("MaxWallDurationPerJob", 4),), "MaxWall", 11, "MaxWall"),
    ((("MinTRESPerJob", 7),), "MinTRES", 13, "MinTRES"),
    ((("Name", 2),), "Name", 10, "name"),
    ((("Organization", 1),), "Org", 20, "org"),
    ((("ParentName", 7),), "ParentName", 10, "pname"),
    ((("Partition", 4),), "Partition", 10, "part"),
    ((("PreemptMode", 8),), "PreemptMode", 11, "preemptmode"),
    ((("Preempt", 7),), "Preempt", 10, "preempt"),
    ((("PreemptExemptTime", 8),), "PreemptExemptTime", 19, "preemptexempt"),
    ((("Priority", 3),), "Priority", 10, "prio"),
    ((("QOSLevel", 3),), "QOS", 20, "qos"),
    ((("RPC", 1),), "RPC", 5, "rpc"),
    ((("Share", 1), ("FairShare", 2)), "Share", 9, "share"),
    ((("UsageFactor", 6),), "UsageFactor", 11, "uf"),
    ((("UsageThreshold", 6),), "UsageThres", 10, "ut"),
    ((("User", 1),), "User", 10, "user"),
)


class UnknownField(ValueError):
    pass


@attrs.frozen
class Column:
    header: str
    width: int  # negative: left-justified
    kind: str


def column(spec: str, tree: bool = False) -> Column:
    """One `format=` entry: a field name, optionally `%N` (a width; `%-N` left-justifies)."""
    name, pct, width = spec.partition("%")
    low = name.lower()
    for spellings, header, default, kind in FIELDS:
        for spelling, least in spellings:
            n = max(len(low), least)
            if spelling.lower()[:n] == low[:n] and len(low) <= len(spelling):
                w = default if not (kind == "acct" and tree) else -20
                digits = width[1:] if width.startswith("-") else width
                if pct and digits.isdigit() and int(width):  # atoi: %x is no width
                    w = int(width)
                return Column(header, w, kind)
    raise UnknownField(f"Unknown field '{name}'\n")


def columns(specs: tuple[str, ...] | list[str], tree: bool = False) -> list[Column]:
    return [column(s, tree) for s in specs]


def _cell(value: str, width: int) -> str:
    n = abs(width)
    text = value[:n]
    if len(value) > n and n:
        text = text[:n - 1] + "+"
    return (f"{text:>{n}} " if width >= 0 else f"{text:<{n}} ")


def render(cols: list[Column], rows: list[list[str]], *, header: bool = True,
           parsable: str = "") -> str:
    """print_fields: `parsable` is "" (a table), "p" (a '|' after each) or "P" (between)."""
    lines = []
    if header:
        lines.append(_line([c.header for c in cols], cols, parsable, header=True))
        if not parsable:
            lines.append("".join("-" * abs(c.width) + " " for c in cols))
    lines += [_line(r, cols, parsable) for r in rows]
    return "".join(line + "\n" for line in lines)


def _line(values: list[str], cols: list[Column], parsable: str, header: bool = False) -> str:
    if parsable == "P":
        return "|".join(values)
    if parsable == "p":
        return "".join(v + "|" for v in values)
    if header:  # the header is cut to the width, never marked with '+'
        return "".join((f"{v[:abs(c.width)]:>{abs(c.width)}} " if c.width >= 0
                        else f"{v[:abs(c.width)]:<{abs(c.width)}} ")
                       for v, c in zip(values, cols, strict=True))
    return "".join(_cell(v, c.width) for v, c in zip(values, cols, strict=True))
