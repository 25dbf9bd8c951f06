"""sshare 22.05's rows (src/sshare/process.c): which associations a caller sees and each field
as print_fields writes it, from rctld's ShareReply (ranch/protocol/adminmessages.py)."""

from __future__ import annotations

FS_PARENT = 0x7FFFFFFF  # Fairshare=parent


def chosen(lines: list[dict], *, everyone: bool, users: list[str],
           accounts: list[str], only_users: bool, me: str) -> list[dict]:
    """Accounts' rows always (but for -U); users' rows: all with -a, those named by -u, else
    the caller's own; -A keeps the rows of the accounts named. Each is indented by the rows
    above it in the tree that are shown (sshare's hierarchy of what it got)."""
    out = []
    above: list[tuple[int, bool]] = []  # (depth, shown) of the rows on the path to this one
    for line in lines:
        while above and above[-1][0] >= line["depth"]:
            above.pop()
        shown = _shown(line, everyone=everyone, users=users, accounts=accounts,
                       only_users=only_users, me=me)
        if shown:
            out.append({**line, "depth": sum(s for _, s in above)})
        if not line["user"]:  # a user's row is nobody's parent (the controller may send a
            above.append((line["depth"], shown))  # user's rows alone: PrivateData=usage)
    return out


def _shown(line: dict, *, everyone: bool, users: list[str], accounts: list[str],
           only_users: bool, me: str) -> bool:
    user = line["user"]
    if accounts and line["account"] not in accounts:
        return False
    if not user:
        return not only_users
    if users:
        return user in users
    return everyone or user == me


def _double(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:f}"  # print_fields_double: %f (inf as "inf")


def field(name: str, line: dict, cluster: str) -> str:
    """One field of a row as sshare prints it (before padding)."""
    root_row = line["raw_shares"] == -1
    if name == "Account":
        return " " * line["depth"] + line["account"]
    if name == "User":
        return line["user"]
    if name == "Cluster":
        return cluster
    if name == "ID":
        return str(line["id"])
    if name == "Partition":
        return line["partition"]
    if name == "RawShares":
        shares = line["raw_shares"]
        return "" if root_row else "parent" if shares == FS_PARENT else str(shares)
    if name == "NormShares":
        return _double(0.0 if root_row else line["norm_shares"])
    if name == "RawUsage":
        return str(int(line["raw_usage"]))
    if name == "NormUsage":
        return "" if root_row else _double(line["norm_usage"])
    if name == "EffectvUsage":
        return _double(1.0 if root_row else line["effective_usage"])
    if name == "FairShare":
        return _double(line["fairshare"])
    if name == "LevelFS":
        lfs = line["level_fs"]
        return "" if root_row else "inf" if lfs is None else _double(lfs)
    if name == "GrpTRESMins":
        return line["grp_tres_mins"]
    if name == "TRESRunMins":
        return line["tres_run_mins"]
    return ""  # GrpTRESRaw: Ranch keeps no per-TRES usage (docs/slurm-compat.md)


def render(cols: list[tuple[int, str]], line: dict, cluster: str, parsable: str) -> str:
    """print_fields: `|`-joined for -P (a trailing one for -p), else each padded to its width
    (negative: left-justified), a value too long cut with a `+` at its end."""
    values = [field(name, line, cluster) for _, name in cols]
    if parsable:
        return "|".join(values) + ("|" if parsable == "p" and cols else "")
    out = ""
    for (width, _), value in zip(cols, values, strict=True):
        w = abs(width)
        if len(value) > w:
            value = value[:w - 1] + "+"
        out += (f"{value:<{w}} " if width < 0 else f"{value:>{w}} ")
    return out
