"""rcontrol create|update|delete|show reservation and rinfo -T, in scontrol's and sinfo's words."""

from __future__ import annotations

import getpass
import sys
import time

from ranch.cli.controller import CliError, Target, ask
from ranch.cli.slurm_names import prog
from ranch.conf.timefmt import slurm_timestamp

KEYS = {"reservationname": "name", "reservation": "name", "starttime": "start",
        "endtime": "end", "duration": "duration", "nodes": "nodes", "nodecnt": "node_count",
        "nodecount": "node_count", "flags": "flags", "users": "users", "user": "users"}


def _duration(text: str) -> int | None:
    """Minutes (-1: UNLIMITED), or None where scontrol 22.05 refuses it: a malformed time, or a
    negative one other than -1 (time_str2mins's INFINITE), which Ranch once took for UNLIMITED."""
    from ranch.conf.timefmt import parse_minutes

    try:
        minutes = parse_minutes(text)
    except ValueError:
        return None
    if minutes is None:
        return -1
    return minutes if minutes >= 0 else None


def parse(action: str, words: list[str]) -> dict:
    """Key=Value words (keys case-insensitive) into a ReservationRequest body."""
    from ranch.cli.begin_time import BeginError, parse_begin

    body: dict = {"action": action, "user": getpass.getuser()}
    now = time.time()
    for word in words:
        key, eq, value = word.partition("=")
        field = KEYS.get(key.strip().lower())
        if not eq or field is None:
            raise CliError(f"invalid reservation option {word!r}; Ranch takes ReservationName, "
                           "StartTime, EndTime, Duration, Nodes, NodeCnt, Flags, Users", code=2)
        try:
            if field in ("start", "end"):
                body[field] = parse_begin(value, now)
            elif field == "duration":
                minutes = _duration(value)
                if minutes is None:  # scontrol's words, and its status
                    done = "created" if action == "create" else "update"
                    raise CliError(f"Invalid duration {word}.  No reservation {done}.")
                body[field] = minutes
            elif field == "node_count":
                body[field] = int(value)
            elif field in ("flags", "users"):
                body[field] = [v.strip() for v in value.split(",") if v.strip()]
            else:
                body[field] = value
        except (BeginError, ValueError) as exc:
            raise CliError(f"invalid {key}={value}: {exc}", code=2) from None
    if action in ("update", "delete") and not body.get("name"):
        raise CliError(f"{action} reservation: ReservationName= is required", code=2)
    return body


def command(target: Target, action: str, words: list[str]) -> int:
    """`create reservation K=V...`, `update reservationname=X K=V...`, `delete reservation=X`
    (scontrol's forms; `delete reservation X` too)."""
    if action == "delete" and len(words) == 2 and words[0].lower() in ("reservation",
                                                                       "reservationname"):
        words = [f"reservation={words[1]}"]
    elif words and words[0].lower() == "reservation" and action != "delete":
        words = words[1:]
    body = parse(action, words)
    reply = ask(target, "ReservationRequest", body, want="ReservationReply")
    if reply.get("ok"):
        if action == "create":
            print(f"Reservation created: {reply.get('name')}")
        elif action == "update":
            print("Reservation updated.")
        return 0
    errors = list(reply.get("errors") or ("the controller refused",))
    if action == "create":
        print(f"Error creating the reservation: {errors[0]}", file=sys.stderr)
    elif action == "update":
        print(f"Error updating the reservation: {errors[0]}", file=sys.stderr)
    else:
        print(f"delete_reservation {' '.join(words)}: {errors[0]}", file=sys.stderr)
    for err in errors[1:]:
        print(f"{prog('rcontrol')}: error: {err}", file=sys.stderr)
    return 1


def _span(seconds: float) -> str:
    """Slurm's secs2time_str: [D-]HH:MM:SS."""
    s = int(seconds)
    days, s = divmod(s, 86400)
    text = f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days}-{text}" if days else text


def fetch(target: Target, name: str = "") -> list[dict]:
    reply = ask(target, "ReservationRequest", {"action": "show", "name": name},
                want="ReservationReply")
    if not reply.get("ok"):
        raise CliError("; ".join(reply.get("errors") or ("the controller refused",)))
    return list(reply.get("reservations") or ())


def show(target: Target, name: str | None, one_line: bool, as_json: bool,
         json_doc=None) -> int:
    items = fetch(target, name or "")
    if as_json and json_doc is not None:
        sys.stdout.write(json_doc("reservations", items, ""))
        return 0
    if not items:
        print("No reservations in the system")
        return 0
    out = []
    for r in items:
        cpus = r.get("core_count", 0)
        lines = [
            [f"ReservationName={r['name']}", f"StartTime={slurm_timestamp(r['start_time'])}",
             f"EndTime={slurm_timestamp(r['end_time'])}", f"Duration={_span(r['duration'])}"],
            [f"Nodes={r['nodes'] or '(null)'}", f"NodeCnt={r['node_count']}",
             f"CoreCnt={cpus}", "Features=(null)", "PartitionName=(null)",
             f"Flags={','.join(r['flags']) or '(null)'}"],
            [f"TRES=cpu={cpus}"],
            [f"Users={','.join(r['users']) or '(null)'}", "Groups=(null)", "Accounts=(null)",
             "Licenses=(null)", f"State={r['state']}", "BurstBuffer=(null)", "Watts=n/a"],
            ["MaxStartDelay=(null)"],
        ]
        if one_line:
            out.append(" ".join(w for line in lines for w in line) + "\n")
        else:
            out.append(lines[0][0] + " " + " ".join(lines[0][1:]) + "\n"
                       + "".join("   " + " ".join(line) + "\n" for line in lines[1:]))
    sys.stdout.write(("" if one_line else "\n").join(out))
    return 0


def sinfo_t(target: Target, no_header: bool) -> str:
    """sinfo -T: name, state, start, end, duration, nodes (the name's width as sinfo's)."""
    items = fetch(target)
    if not items:
        return "No reservations in the system\n"
    width = 9
    if not no_header:
        width = max([width, *(len(r["name"]) for r in items)])
    fmt = f"{{:<{width}}}  {{:>8}}  {{:>19}}  {{:>19}}  {{:>11}}  {{}}\n"
    text = "" if no_header else fmt.format("RESV_NAME", "STATE", "START_TIME", "END_TIME",
                                           "DURATION", "NODELIST")
    now = time.time()
    for r in items:
        state = "ACTIVE" if r["start_time"] <= now <= r["end_time"] else "INACTIVE"
        text += fmt.format(r["name"], state, slurm_timestamp(r["start_time"]),
                           slurm_timestamp(r["end_time"]), _span(r["duration"]), r["nodes"])
    return text
