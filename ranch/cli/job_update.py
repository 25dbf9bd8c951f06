"""`rcontrol update JobId=ID[,ID...] Key=Value...`: the keys scontrol 22.05 reads for a job,
checked as scontrol checks them; rctld applies them (ctld/jobs/jobupdate.py) and answers each
refusal as slurmctld words it ("Access/permission denied for job 12")."""

from __future__ import annotations

import os
import sys

from ranch.cli.controller import CliError, Target

# scontrol's key (lower case) -> the one rctld reads
KEYS = {"timelimit": "TimeLimit", "name": "Name", "jobname": "Name", "comment": "Comment",
        "partition": "Partition", "numnodes": "NumNodes", "reqnodes": "NumNodes",
        "dependency": "Dependency", "priority": "Priority", "nice": "Nice",
        "arraytaskthrottle": "ArrayTaskThrottle", "starttime": "StartTime",
        "begintime": "StartTime"}
KEYS.update({"sitefactor"[:n]: "SiteFactor" for n in range(5, 11)})  # SiteF at least
SITE_LIMIT = 2147483645  # NICE_OFFSET - 3


def _strtol(text: str) -> int:
    from ranch.cli.squeue_options import _strtol as strtol

    return strtol(text)[0]


def _value(key: str, value: str) -> str:
    """The value as rctld reads it, or scontrol's refusal (CliError)."""
    import time

    from ranch.conf.timefmt import parse_minutes

    if key == "TimeLimit":  # `+N`/`-N` add to or take from the limit (rctld does the sum)
        rest = value[1:] if value[:1] in "+-" and value != "-1" else value
        try:
            parse_minutes(rest)
        except ValueError:
            raise CliError("Invalid TimeLimit value") from None
        return value
    if key == "Priority":
        if not value.strip().isdigit():
            raise CliError(f"Invalid Priority value: {value}")
        return value.strip()
    if key == "SiteFactor":  # strtoll, within +/- NICE_OFFSET - 3 (update_job.c)
        if abs(_strtol(value)) > SITE_LIMIT:
            raise CliError(f"SiteFactor value out of range (+/- {SITE_LIMIT}). Value ignored")
        return str(_strtol(value))
    if key == "Nice":  # strtoll, as scontrol reads it
        return str(_strtol(value))
    if key == "NumNodes":
        low, _, high = value.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise CliError(f'Invalid numeric value "{value}" for requested node count.')
        return low
    if key == "ArrayTaskThrottle":  # strtol: `abc` is 0 (no throttle), as scontrol reads it
        if _strtol(value) < 0:
            raise CliError("Invalid ArrayTaskThrottle value")
        return str(_strtol(value))
    if key == "StartTime":
        from ranch.cli.begin_time import BeginError, parse_begin

        try:
            return repr(parse_begin(value, time.time()))
        except BeginError as exc:
            raise CliError(str(exc).replace("--begin=", "StartTime=")) from None
    return value


def update_job(target: Target, words: list[str], acting: tuple[str, int] | None = None
               ) -> int:
    import getpass

    from ranch.cli.controller import request
    from ranch.cli.job_requests import fetch_jobs, parse_job_ids

    ids: list[str] = []
    updates: list[tuple[str, str]] = []
    for word in words:
        key, sep, value = word.partition("=")
        if not sep:
            raise CliError(f"update: expected Key=Value, got {word!r}")
        if key.lower() == "jobid":
            ids += [w for w in value.split(",") if w]
            continue
        name = KEYS.get(key.lower())
        if name is None:  # scontrol's two lines, before anything is sent
            print(f"Update of this parameter is not supported: {word}\nRequest aborted",
                  file=sys.stderr)
            return 1
        updates.append((name, _value(name, value)))
    if not ids:
        raise CliError("update: JobId= names no job")
    if not updates:
        print("No changes specified", file=sys.stderr)
        return 1
    jobs = fetch_jobs(target)[1] if any("_" in w for w in ids) else None
    user, uid = acting or (getpass.getuser(), os.getuid())
    body = {"action": "update", "job_ids": list(parse_job_ids(ids, jobs)),
            "user": user, "uid": uid, "updates": updates}
    result = request(target, "JobControl", body, want="JobResult", timeout=30.0)
    for err in result.get("errors") or ():
        print(err, file=sys.stderr)  # slurmctld's line as scontrol prints it
    return 0 if result.get("ok") is True else 1
