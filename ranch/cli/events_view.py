"""`rcontrol events` and `rcontrol approve|reject|delete`: the membership side of rcontrol.

Event records (docs/internals.md "Event records") are rendered as Key=Value lines, as JSON, or
folded into a drain history per node (who drained, why, when; who resumed, with what note).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterable

from ranch.cli.controller import CliError
from ranch.cli.slurm_names import prog

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hour|d|day)s?$", re.IGNORECASE)
_UNIT = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600, "d": 86400,
         "day": 86400}
FOLLOW_BACKLOG = 10  # events --follow prints before the new ones, unless --since/--limit
_FORMS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d", "%H:%M:%S", "%H:%M")


def parse_since(text: str, now: float | None = None) -> float:
    """--since: YYYY-MM-DD[THH:MM[:SS]], HH:MM[:SS] (today), epoch seconds, or an age such as
    10min, 2h, 1day, now-1hour (local time, like Slurm's time options)."""
    now = time.time() if now is None else now
    t = text.strip()
    rel = t[4:] if t.lower().startswith("now-") else t
    hit = _RELATIVE.match(rel)
    if hit:
        return now - float(hit.group(1)) * _UNIT[hit.group(2).lower()]
    if t.lower() == "now":
        return now
    if re.fullmatch(r"\d{9,}(\.\d+)?", t):
        return float(t)
    for form in _FORMS:
        try:
            parsed = time.strptime(t, form)
        except ValueError:
            continue
        if form.startswith("%H"):
            today = time.localtime(now)
            parsed = time.struct_time((today.tm_year, today.tm_mon, today.tm_mday,
                                       parsed.tm_hour, parsed.tm_min, parsed.tm_sec, 0, 0, -1))
        return time.mktime(parsed)
    raise CliError(f"--since {text!r}: expected YYYY-MM-DD[THH:MM[:SS]], HH:MM[:SS], epoch "
                   "seconds or an age such as 30min, 2h, 1day")


def events_parser() -> argparse.ArgumentParser:
    from ranch.cli.usage_parser import UsageParser

    p = UsageParser(prog="rcontrol events", add_help=False,
                    description="The membership and state event log, oldest first.")
    a = p.add_argument
    a("--help", action="help", help="show this help and exit")
    a("-f", "--follow", action="store_true",
      help="print the last 10 events (or --since/--limit), then new ones as they happen")
    a("--since", metavar="TIME", help="events at or after TIME (e.g. 2h, 2026-01-31T08:00)")
    a("-n", "--nodes", metavar="HOSTLIST", default="", help="only these nodes")
    a("--limit", type=int, default=0, metavar="N", help="the newest N events only")
    a("--drains", action="store_true", help="drain history per node")
    a("-j", "--job", type=int, default=0, metavar="JOBID",
      help="only the scheduling decisions that name this job: its own start and reservations, "
           "and the starts of jobs that passed it (with why)")
    a("--json", action="store_true", help="as JSON (one object per line with --follow)")
    return p


def _time(epoch: float | None) -> str:
    from ranch.cli.node_records import iso_time

    return iso_time(epoch, missing="None")


def _quote(text: str) -> str:
    return f'"{text}"' if (" " in text or not text) else text


def event_line(e: dict) -> str:
    """One event, scontrol style: Time=... Node=... Event=... and what the event carries."""
    parts = [f"Time={_time(e.get('time'))}", f"Node={e.get('node')}", f"Event={e.get('kind')}"]
    if e.get("kind") == "state":
        parts.append(f"State={e.get('old')}->{e.get('new')}")
    preempt = e.get("kind") == "preempt"  # a preemption's record (ctld/jobs/preemption.py)
    if e.get("job") is not None and not preempt:  # a decision (ctld/jobs/decisions.py)
        parts += _decision(e)
    for key, label in (("name", "Reservation"), ("action", "Action"), ("cause", "Cause"),
                       ("user", "User"), ("reason", "Reason"),
                       ("peer", "Peer"), ("problem", "Problem"), ("conf", "Conf")):
        if e.get(key) not in (None, ""):
            parts.append(f"{label}={_quote(str(e[key]))}")
    if e.get("partitions"):
        parts.append("Partitions=" + ",".join(e["partitions"]))
    for key, label in PREEMPT_FIELDS if preempt else ():
        if e.get(key) not in (None, ""):
            parts.append(f"{label}={_quote(str(e[key]))}")
    return " ".join(parts)


PREEMPT_FIELDS = (("job", "JobId"), ("qos", "QOS"), ("victims", "Victims"),
                  ("stopped", "Stopped"), ("mode", "Mode"), ("grace", "Grace"),
                  ("candidates", "Candidates"))


def _decision(e: dict) -> list[str]:
    """JobId= Scheduler= Priority= Partition= Nodes= StartTime= (a reservation), Why=, and
    Ahead=id(prio):reason,... of the jobs it passed."""
    out = [f"JobId={e['job']}"]
    for key, label in (("scheduler", "Scheduler"), ("priority", "Priority"),
                       ("partition", "Partition"), ("nodes", "Nodes"), ("rank", "Rank")):
        if e.get(key) not in (None, ""):
            out.append(f"{label}={e[key]}")
    if e.get("start") is not None:
        out.append(f"StartTime={_time(e['start'])}")
    was = e.get("was")
    if isinstance(was, dict):
        out.append(f"Was={_time(was.get('start'))}@{was.get('nodes')}")
    if e.get("why"):
        out.append(f"Why={_quote(str(e['why']))}")
    ahead = [a for a in e.get("ahead") or () if isinstance(a, dict)]
    if ahead or e.get("passed"):
        shown = ",".join(f"{a.get('job')}({a.get('priority')}):{a.get('reason')}"
                         for a in ahead)
        more = (e.get("passed") or 0) - len(ahead)
        out.append(f"Ahead={_quote(shown + (f',+{more} more' if more > 0 else ''))}")
    return out


def _flags(complete: str | None) -> set[str]:
    return set((complete or "").split("+")[1:])


def drain_history(events: Iterable[dict]) -> list[dict]:
    """Each drain of each node: when, by whom, why; and when it ended, by whom, with what note
    (a RESUME's Reason=). A drain still in force has resumed = None."""
    open_by_node: dict[str | None, dict] = {}  # by the node the event names
    out: list[dict] = []
    for e in events:
        if e.get("kind") != "state":
            continue
        node = e.get("node")
        before, after = _flags(e.get("old")), _flags(e.get("new"))
        if "DRAIN" in after and "DRAIN" not in before:
            entry = {"node": node, "drained": e.get("time"), "drained_by": e.get("user"),
                     "cause": e.get("cause"), "reason": e.get("reason"), "resumed": None,
                     "resumed_by": None, "note": None}
            open_by_node[node] = entry
            out.append(entry)
        elif "DRAIN" in before and "DRAIN" not in after and node in open_by_node:
            entry = open_by_node.pop(node)
            entry.update(resumed=e.get("time"), resumed_by=e.get("user") or e.get("cause"),
                         note=e.get("reason"))
    return out


def drains_text(history: list[dict]) -> str:
    """Columns like sinfo -R: NODELIST, who/when drained, REASON, who/when resumed, NOTE."""
    head = ("NODELIST", "DRAINED", "BY", "REASON", "RESUMED", "BY", "NOTE")
    rows = [head] + [
        (h["node"], _time(h["drained"]), h["drained_by"] or h["cause"] or "-",
         h["reason"] or "-", _time(h["resumed"]) if h["resumed"] else "-",
         h["resumed_by"] or "-", h["note"] or "-")
        for h in history
    ]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head) - 1)]
    return "".join(
        " ".join(str(c).ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + " " + r[-1]
        + "\n"
        for r in rows
    )


def events_command(target, words: list[str], json_out: bool) -> int:
    import orjson

    from ranch.cli.controller import ask

    args = events_parser().parse_args(words)
    as_json = json_out or args.json
    body = {"since": parse_since(args.since) if args.since else 0.0, "nodes": args.nodes,
            "limit": 0 if args.job else max(0, args.limit), "follow": bool(args.follow)}
    if args.nodes and args.nodes.upper() != "ALL":
        from ranch.conf.hostlist import expand

        try:
            expand(args.nodes)
        except ValueError as exc:
            raise CliError(f"-n {args.nodes}: {exc}") from None
    if args.follow:
        if not args.since and args.limit <= 0:
            body["limit"] = FOLLOW_BACKLOG  # like tail -f: the last few, then what comes
        if args.drains:
            raise CliError("--drains and --follow do not go together")
        return _follow(target, body, as_json, args.job)
    reply = ask(target, "GetEvents", body, want="Events")
    events = reply.get("events") or []
    if args.job:  # the decision records name it (ctld/jobs/decisions.py); --limit after that
        events = [e for e in events if names_job(e, args.job)]
        events = events[-args.limit:] if args.limit > 0 else events
    if args.drains:
        history = drain_history(events)
        if as_json:
            sys.stdout.write(orjson.dumps({"drains": history},
                                          option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            sys.stdout.write(drains_text(history))
        return 0
    if as_json:
        sys.stdout.write(orjson.dumps({"events": events}, option=orjson.OPT_INDENT_2).decode()
                         + "\n")
    else:
        sys.stdout.write("".join(event_line(e) + "\n" for e in events))
    return 0


def names_job(e: dict, job: int) -> bool:
    """A decision record about the job, or one of a job that passed it."""
    return e.get("job") == job or any(a.get("job") == job for a in e.get("ahead") or ()
                                      if isinstance(a, dict))


def _follow(target, body: dict, as_json: bool, job: int = 0) -> int:
    import orjson

    from ranch.cli.credential import munge_error, munge_errors, signer
    from ranch.protocol.client import ControllerUnreachable, stream_raw
    from ranch.protocol.rawframe import FrameError

    key, munge = signer(target)
    try:
        for kind, doc in stream_raw((target.host, target.port), key, "GetEvents", body,
                                    munge=munge):
            if kind == "Error":
                raise CliError(f"controller at {target.address} refused the request: "
                               f"{doc.get('message') or doc.get('code')}")
            missed, events = doc.get("missed") or 0, doc.get("events") or []
            if not isinstance(missed, int) or not isinstance(events, list):
                raise CliError(f"controller at {target.address}: a malformed Events reply")
            out = []
            if missed:
                if as_json:
                    out.append(orjson.dumps({"missed": missed}).decode())
                else:
                    out.append(f"{prog('rcontrol')}: {missed} event(s) missed: this reader "
                               "fell behind")
            for e in events:
                if not job or names_job(e, job):
                    out.append(orjson.dumps(e).decode() if as_json else event_line(e))
            if out:
                sys.stdout.write("".join(line + "\n" for line in out))
                sys.stdout.flush()
    except ControllerUnreachable as exc:
        raise CliError(f"controller at {target.address}: {exc.reason}") from None
    except FrameError as exc:
        raise CliError(f"controller at {target.address}: {exc.code}: {exc.message}") from None
    except munge_errors(munge) as exc:
        raise munge_error(exc) from None
    raise CliError(f"controller at {target.address} closed the event stream")


def parse_membership(action: str, words: list[str]) -> tuple[str, str | None]:
    """(NodeName hostlist, Reason) of approve|reject|delete; reject needs a Reason."""
    from ranch.cli.keyvalue import parse_key_values
    from ranch.conf.hostlist import expand

    keys = {"nodename": "NodeName", "nodes": "NodeName", "reason": "Reason"}
    given = parse_key_values(action, words, keys, "NodeName, Reason")
    node_expr, reason = given.get("NodeName"), given.get("Reason")
    if not node_expr:
        raise CliError(f"{action}: NodeName=HOSTLIST is required")
    try:
        expand(node_expr)
    except ValueError as exc:
        raise CliError(f"NodeName={node_expr}: {exc}") from None
    if action == "reject" and not (reason or "").strip():
        raise CliError('reject: Reason="..." is required (the node is told why)')
    return node_expr, reason


def membership_command(target, action: str, words: list[str]) -> int:
    import getpass

    from ranch.cli.controller import ask

    node_expr, reason = parse_membership(action, words)
    body = {"action": action, "node_names": node_expr, "reason": reason,
            "user": getpass.getuser()}
    result = ask(target, "NodeMembership", body, want="UpdateResult")
    errors = result.get("errors") or ()
    for err in errors:
        print(f"{prog('rcontrol')}: error: {err}", file=sys.stderr)
    ok = result.get("ok") is True
    if not ok and not errors:
        print(f"{prog('rcontrol')}: error: the controller refused to {action}", file=sys.stderr)
    return 0 if ok else 1
