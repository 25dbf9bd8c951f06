"""rsprio (sprio): the pending jobs' priority factors as sprio 22.05 prints them (src/sprio/),
from rctld's priority/multifactor (ctld/jobs/priorities.py, issue 44); `--json` is Ranch's."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from ranch.cli import sbatch_options as so
from ranch.cli.controller import CliError, run_main
from ranch.cli.slurm_names import opening, prog

OPTIONS = so.Options((
    so.Opt("noheader", "h", so.NO), so.Opt("jobs", "j", so.OPTIONAL),
    so.Opt("long", "l", so.NO), so.Opt("cluster", "", so.REQUIRED),
    so.Opt("clusters", "M", so.REQUIRED), so.Opt("norm", "n", so.NO),
    so.Opt("format", "o", so.REQUIRED), so.Opt("sort", "S", so.REQUIRED),
    so.Opt("partition", "p", so.REQUIRED), so.Opt("user", "u", so.REQUIRED),
    so.Opt("users", "", so.REQUIRED), so.Opt("verbose", "v", so.NO),
    so.Opt("version", "V", so.NO), so.Opt("weights", "w", so.NO),
    so.Opt("federation", "", so.NO), so.Opt("help", "", so.NO), so.Opt("local", "", so.NO),
    so.Opt("sibling", "", so.NO), so.Opt("usage", "", so.NO), so.Opt("json", "", so.NO),
))
NICE_LONG = "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T"
NORM_LONG = "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t"
# the factor columns, in the order the default formats add them, with the weight each needs
FACTORS = (("age", "A"), ("assoc", "B"), ("fairshare", "F"), ("jobsize", "J"),
           ("partition", "P"), ("qos", "Q"))
ROW_KEYS = {"A": "age", "B": "assoc", "F": "fairshare", "J": "jobsize", "P": "part", "Q": "qos"}
HEADERS = {"a": "AGE", "A": "AGE", "b": "ASSOC", "B": "ASSOC", "c": "CLUSTER",
           "f": "FAIRSHARE", "F": "FAIRSHARE", "i": "JOBID", "j": "JOBSIZE", "J": "JOBSIZE",
           "N": "NICE", "p": "PARTITION", "P": "PARTITION", "r": "PARTITION", "S": "SITE",
           "q": "QOS", "Q": "QOS", "u": "USER", "y": "PRIORITY", "Y": "PRIORITY", "t": "TRES",
           "T": "TRES"}


def default_format(weights: dict, *, normalized: bool, long: bool, users: bool) -> str:
    """sprio.c's formats: every factor with -l; otherwise those whose weight is not 0."""
    if long:
        return NORM_LONG if normalized else NICE_LONG
    out = "%.15i %9r"
    if users:
        out += " %.8u"
    out += " %10y" if normalized else " %.10Y %.10S"
    for name, letter in FACTORS:
        if weights.get(name):
            out += f" %10{letter.lower()}" if normalized else f" %.10{letter}"
    if weights.get("tres"):
        out += " %20t" if normalized else " %.20T"
    return out


def parse_format(spec: str) -> list[tuple[str, int, bool, str]]:
    """(field, width, right-justified, suffix) per `%` token, a prefix as field ""."""
    out: list[tuple[str, int, bool, str]] = []
    head, pct, rest = spec.partition("%")
    if head:
        out.append(("", 0, False, head))
    if not pct:
        return out
    for token in (t for t in rest.split("%") if t):
        i, right = (1, True) if token[0] == "." else (0, False)
        digits = ""
        while i < len(token) and token[i].isdigit():
            digits += token[i]
            i += 1
        field = token[i:i + 1]
        if field not in HEADERS:
            print(f"{prog('rsprio')}: error: Invalid job format specification: {field}",
                  file=sys.stderr)
            continue
        out.append((field, int(digits or 0), right, token[i + 1:]))
    return out


def cell(text: str, width: int, right: bool) -> str:
    """_print_str with cut_output: right-justified in, or cut and padded to, `width`."""
    if not width:
        return text
    return f"{text:>{width}}"[:width] if right else f"{text[:width]:<{width}}"


def _int(x: float) -> str:
    return f"{x:.0f}"


def _norm(x: float) -> str:
    return f"{x:.7f}"


def shown_priority(row: dict) -> float:
    """get_priority_from_factors: the weighted sum less nice, at least 1; an admin's own."""
    if row["direct"]:
        return float(row["direct"])
    prio = (row["age"] + row["assoc"] + row["fairshare"] + row["jobsize"] + row["part"]
            + row["qos"] + float(row["site"]) - float(row["nice"]))
    for _, v in row["tres"]:
        prio += v
    return max(prio, 1.0)


def value(field: str, row: dict | None, weights: dict) -> str:
    """One cell's text: the header (row None), the Weights row ({}), or a job's."""
    if row is None:
        return HEADERS[field]
    if not row:  # -w
        if field in "ABFJPQabfjpq":
            key = dict((letter, name) for name, letter in FACTORS)[field.upper()]
            return _int(weights.get(key, 0))
        if field == "i":
            return "Weights"
        if field == "S":
            return "1"
        if field == "T":
            return str(weights.get("tres") or "")
        return ""
    if field == "i":
        return str(row["job_id"])
    if field == "r":
        return row["partition"]
    if field == "u":
        return row["user"]
    if field == "c":
        return ""
    if field == "Y":
        return str(int(shown_priority(row)))
    if field == "y":
        if row["direct"]:
            return f"{float(row['direct']):16.14f}"
        return f"{shown_priority(row) / 4294967295:16.14f}"
    if field == "S":
        return "0" if row["direct"] else str(row["site"])
    if field == "N":
        return "0" if row["direct"] else str(row["nice"])
    if field in ROW_KEYS:
        return _int(row[ROW_KEYS[field]])
    if field in "abfjpq":
        key = dict((letter.lower(), name) for name, letter in FACTORS)[field]
        weight = weights.get(key, 0)
        return _norm(row[ROW_KEYS[field.upper()]] / weight if weight else 0.0)
    if field == "T":
        return ",".join(f"{n}={v:.0f}" for n, v in row["tres"] if v)
    if field == "t":
        return ",".join(f"{n}={v:.2f}" for n, v in row.get("tres_norm") or () if v)
    return ""


def line(fields: list[tuple[str, int, bool, str]], row: dict | None, weights: dict) -> str:
    out = ""
    for field, width, right, suffix in fields:
        if field:
            out += cell(value(field, row, weights), width, right)
        out += suffix
    return out


SORTS: dict[str, Callable[[dict], Any]] = {
    "i": lambda r: r["job_id"], "N": lambda r: r["nice"], "r": lambda r: r["partition"],
    "u": lambda r: r["user"], "a": lambda r: r["age"], "f": lambda r: r["fairshare"],
    "j": lambda r: r["jobsize"], "p": lambda r: r["part"], "q": lambda r: r["qos"],
    "y": shown_priority, "t": lambda r: sum(v for _, v in r["tres"]),
}


def sort_rows(rows: list[dict], spec: str) -> list[dict]:
    """sort.c: the keys from the last, each `-` descending (default: by job id)."""
    for i in range(len(spec) - 1, -1, -1):
        c = spec[i]
        if c in ",+-":
            continue
        key = SORTS.get(c if c in "iNru" else c.lower())
        if key is None:
            raise CliError(f"Invalid sort specification: {c}")
        rows.sort(key=key, reverse=i > 0 and spec[i - 1] == "-")
    return rows


def _ids(text: str) -> tuple[int, ...]:
    out = []
    for word in (w for w in text.split(",") if w.strip()):
        try:
            out.append(int(word.split("_")[0]))
        except ValueError:
            raise CliError(f"Invalid job id: {word}") from None
    return tuple(out)


def run(argv: list[str]) -> int:
    name = prog("rsprio")
    opened = opening("rsprio", argv, OPTIONS, "Usage: {name} [-j jid[s]] [-u user_name[s]] "
                     "[-o format] [-p partitions]\n  [--federation] [--local] [--sibling] "
                     "[--usage] [-hlnvVw] [--json]")
    if isinstance(opened, int):
        return opened
    values, rest = opened
    if values.get("clusters") or values.get("cluster"):
        raise CliError("Problem talking to database")
    fmt = values.get("format")
    if values.get("long") and fmt:
        print(f"{name}: fatal: Options -o(--format) and -l(--long) are mutually exclusive. "
              "Please remove one and retry.", file=sys.stderr)
        return 1
    if not fmt and not values.get("long"):
        fmt = os.environ.get("SPRIO_FORMAT") or None
    jobs_flag = "jobs" in values
    jobs_text = str(values.get("jobs") or "")
    if rest and jobs_flag and not jobs_text:
        jobs_text, rest = rest[0], rest[1:]
    if rest:
        print(f"{name}: error: Unrecognized option: {rest[0]}", file=sys.stderr)
        return 1
    users = _words(values.get("user") or values.get("users"))
    reply = _ask(jobs_text, users, _words(values.get("partition")))
    if not reply.get("multifactor"):
        print("You are not running a supported priority plugin\n(priority/basic).\n"
              "Only 'priority/multifactor' is supported.", file=sys.stderr)
        return 1
    weights = dict(reply.get("weights") or {})
    rows = sort_rows([dict(r) for r in reply.get("rows") or ()], str(values.get("sort") or "i"))
    if values.get("json"):
        print(json.dumps({"weights": weights, "jobs": [_json_row(r) for r in rows]}, indent=2))
        return 0
    spec = str(fmt) if fmt else default_format(
        weights, normalized=bool(values.get("norm")), long=bool(values.get("long")),
        users=bool(users))
    fields = parse_format(spec)
    if jobs_text and not rows:
        print("Unable to find jobs matching user/id(s) specified")
        return 0
    if not values.get("noheader"):
        print(line(fields, None, weights))
    if values.get("weights"):
        print(line(fields, {}, weights))
        return 0
    for row in rows:
        print(line(fields, row, weights))
    return 0


def _words(value: object) -> list[str]:
    return [w for w in str(value or "").split(",") if w]


def _ask(jobs: str, users: list[str], parts: list[str]) -> dict:
    from ranch.cli.controller import find_target, request

    return request(find_target(None, None, None), "PriorityRequest",
                   {"jobs": list(_ids(jobs)), "users": users, "partitions": parts},
                   want="PriorityReply")


def _json_row(r: dict) -> dict:
    """A job's factors, weighted and as the total sums them (Ranch's --json)."""
    return {"job_id": r["job_id"], "partition": r["partition"], "user": r["user"],
            "priority": int(shown_priority(r)), "site": r["site"], "age": r["age"],
            "assoc": r["assoc"], "fairshare": r["fairshare"], "jobsize": r["jobsize"],
            "partition_factor": r["part"], "qos": r["qos"], "nice": r["nice"],
            "tres": dict(r["tres"]), "admin_priority": r["direct"]}


def main(argv: list[str] | None = None) -> int:
    return run_main("rsprio", run, argv)


if __name__ == "__main__":
    sys.exit(main())
