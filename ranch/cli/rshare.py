"""rshare (sshare): fair-share figures per account and user, as sshare 22.05 prints them, from
rctld's accounting tree and usage (ctld/accounts/, issue 43). With the store off (or no
controller named) it answers what sshare answers on a Slurm without a database: its header (or
nothing with -n), no rows, exit 0 (measured in tests/conformance/test_value_matrix.py)."""

from __future__ import annotations

import os
import sys

from ranch.cli import sbatch_options as so
from ranch.cli.controller import CliError, run_main
from ranch.cli.slurm_names import opening, prog

BASE = (
    so.Opt("accounts", "A", so.REQUIRED), so.Opt("all", "a", so.NO),
    so.Opt("helpformat", "e", so.NO), so.Opt("long", "l", so.NO),
    so.Opt("partition", "m", so.NO), so.Opt("cluster", "", so.REQUIRED),
    so.Opt("clusters", "M", so.REQUIRED), so.Opt("noheader", "n", so.NO),
    so.Opt("format", "o", so.REQUIRED), so.Opt("parsable", "p", so.NO),
    so.Opt("parsable2", "P", so.NO), so.Opt("users", "u", so.REQUIRED),
    so.Opt("Users", "U", so.NO), so.Opt("verbose", "v", so.NO),
    so.Opt("version", "V", so.NO), so.Opt("help", "", so.NO), so.Opt("usage", "", so.NO),
    # sshare's getopt string also takes -h (no header), -q and -t X (read, unused); long names
    # no word can abbreviate
    so.Opt("\0h", "h", so.NO), so.Opt("\0q", "q", so.NO), so.Opt("\0t", "t", so.REQUIRED),
)
OPTIONS = so.Options(BASE)  # as `sshare`: sshare 22.05's
# as `rshare`: also --json, the rows as records (the page's Usage tab reads the same ones)
RANCH_OPTIONS = so.Options((*BASE, so.Opt("json", "", so.NO)))
# src/sshare/process.c fields[]: (width, name); a negative width is left-justified
FIELDS = ((-20, "Account"), (10, "Cluster"), (13, "EffectvUsage"), (10, "FairShare"),
          (30, "GrpTRESMins"), (30, "GrpTRESRaw"), (6, "ID"), (10, "LevelFS"),
          (11, "NormShares"), (11, "NormUsage"), (12, "Partition"), (10, "RawShares"),
          (11, "RawUsage"), (30, "TRESRunMins"), (10, "User"))
# the default lists (PriorityFlags=FAIR_TREE, 22.05's default)
SHORT = "A,User,RawShares,NormShares,RawUsage,Eff,Fairshare"
LONG = ("A,User,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,LevelFS,GrpTRESMins,"
        "TRESRunMins")


def columns(spec: str) -> list[tuple[int, str]]:
    """Each name of a `-o` list: the first field it is a prefix of (any case), `%N` a width."""
    out = []
    for item in (i for i in spec.split(",") if i):
        name, _, width = item.partition("%")
        hit = next((f for f in FIELDS if f[1].lower().startswith(name.lower())), None)
        if hit is None:
            raise CliError(f'Invalid field requested: "{name}"')
        # `%N` right-justifies in N, `%-N` left-justifies (print_fields' sign)
        digits = width[1:] if width.startswith("-") else width
        w = int(width) if digits.isdigit() and int(digits) else hit[0]
        out.append((w, hit[1]))
    return out


def header(cols: list[tuple[int, str]], parsable: str) -> list[str]:
    """print_fields_header: names (and dashes), or `|`-separated names for -p/-P."""
    if parsable:
        names = "|".join(name for _, name in cols)
        return [names + ("|" if parsable == "p" and cols else "")]
    line = dashes = ""
    for width, name in cols:
        w = abs(width)
        line += (f"{name[:w]:<{w}} " if width < 0 else f"{name[:w]:>{w}} ")
        dashes += "-" * w + " "
    return [line, dashes]


def run(argv: list[str]) -> int:
    name = prog("rshare")
    opened = opening("rshare", argv, OPTIONS if name == "sshare" else RANCH_OPTIONS,
                     "Usage: {name} [-aelmnpPUv] [-A accounts] [-o format] [-u users]\n"
                     "  The fair-share tree: each association's shares, usage and factor.")
    if isinstance(opened, int):
        return opened
    values, _rest = opened
    if values.get("helpformat"):
        print(" ".join(n for _, n in FIELDS))
        return 0
    if values.get("clusters") or values.get("cluster"):
        raise CliError("Problem talking to database")
    spec = str(values.get("format") or (LONG if values.get("long") else SHORT))
    if values.get("partition") and not values.get("format"):
        spec = spec.replace("A,User,", "A,User,P,", 1)
    cols = columns(spec)
    parsable = "P" if values.get("parsable2") else "p" if values.get("parsable") else ""
    reply = _ask()
    if values.get("json"):
        return _json(values, reply)
    if not (values.get("noheader") or values.get("\0h")):
        for line in header(cols, parsable):
            print(line)
    if reply is None or not reply.get("enabled"):
        return 0
    from ranch.cli import share_rows

    for row in _chosen(values, reply):
        print(share_rows.render(cols, row, str(reply.get("cluster") or ""), parsable))
    return 0


def _chosen(values: dict, reply: dict) -> list[dict]:
    import pwd

    from ranch.cli import share_rows

    return share_rows.chosen(
        list(reply.get("lines") or ()), everyone=bool(values.get("all")),
        users=_names(values.get("users")), accounts=_names(values.get("accounts")),
        only_users=bool(values.get("Users")), me=pwd.getpwuid(os.getuid()).pw_name)


def _json(values: dict, reply: dict | None) -> int:
    """--json: the rows the same options choose, each the controller's record (ShareLine's
    fields; `depth` as the rows shown indent it), as the web page's Usage tab reads them."""
    import json

    on = reply is not None and bool(reply.get("enabled"))
    rows = _chosen(values, reply) if reply is not None and on else []
    print(json.dumps({"enabled": on, "cluster": (reply or {}).get("cluster") or "",
                      "shares": rows}, indent=2))
    return 0


def _names(value: object) -> list[str]:
    return [n for n in str(value or "").split(",") if n]


def _ask() -> dict | None:
    """rctld's rows; None where no controller is named (the config, RANCH_SERVER or the
    installed config), as racctmgr decides."""
    from ranch.cli.controller import CONF_ENV, INSTALLED_CONF, SERVER_ENV, find_target, request

    env = os.environ
    if not (env.get(CONF_ENV) or env.get(SERVER_ENV) or os.path.exists(INSTALLED_CONF)):
        return None
    return request(find_target(None, None, None), "ShareRequest", {}, want="ShareReply")


def main(argv: list[str] | None = None) -> int:
    return run_main("rshare", run, argv)


if __name__ == "__main__":
    sys.exit(main())
