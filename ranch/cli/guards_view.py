"""`rcontrol show guards`, `rcontrol confirm down|drain [NodeName=...]`, `rcontrol reset guard
[down|drain]`: the controller's breakers over mass DOWN and mass health drains (issue 18)."""

from __future__ import annotations

import getpass
import sys

from ranch.cli.controller import CliError, Target, ask
from ranch.cli.slurm_names import prog

GUARD_WORDS = ("down", "drain")
_FIELDS = (("percent", "Percent"), ("window", "Window"), ("min_nodes", "MinNodes"))


def _time(value: str | float | None) -> str:
    from ranch.cli.node_records import iso_time

    return iso_time(float(value) if value else None, missing="None")


def guard_lines(g: dict) -> list[str]:
    """One guard as scontrol-style lines: name and state, its settings, the nodes it holds."""
    name = g.get("guard", "?")
    held = "Held" if name == "DownGuard" else "Paused"
    lines = [f"GuardName={name} State={g.get('state', '?')} Since={_time(g.get('since'))}"]
    settings = " ".join(f"{label}={g.get(key)}" for key, label in _FIELDS)
    if "drains_in_window" in g:
        settings += f" DrainsInWindow={g['drains_in_window']}"
    lines.append(settings)
    lines.append(f"{held}={g.get('nodes') or '(null)'} {held}Count={g.get('count', 0)}")
    if g.get("detail"):
        lines.append(f"Detail={g['detail']}")
    return lines


def controller_line(c: dict) -> str:
    return (f"ControllerStalls={c.get('stalls', 0)} StalledSeconds={c.get('stalled_seconds', 0)} "
            f"LastStallSeconds={c.get('last_stall_seconds', 0)} "
            f"LastStallTime={_time(c.get('last_stall_at'))} ClockJumps={c.get('clock_jumps', 0)}")


def render(reply: dict, one_line: bool) -> str:
    from ranch.cli.show_records import records_text

    records = [guard_lines(g) for g in reply.get("guards") or ()]
    records.append([controller_line(reply.get("controller") or {})])
    return records_text(records, one_line=one_line)


def show_guards(target: Target, one_line: bool = False, as_json: bool = False) -> int:
    reply = ask(target, "GuardRequest", {"action": "show"}, want="GuardStatus")
    if as_json:
        import orjson

        doc = {"guards": reply.get("guards") or [], "controller": reply.get("controller") or {}}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    sys.stdout.write(render(reply, one_line))
    return 0


def _guard_word(command: str, word: str) -> str:
    w = word.lower()
    hits = [g for g in GUARD_WORDS if g.startswith(w)] if w else []
    if len(hits) != 1:
        raise CliError(f"{command}: {word!r} names no guard; valid: down (the DownGuard, over "
                       "DOWN for silence), drain (the DrainGuard, over health-check drains)")
    return hits[0]


def confirm(target: Target, words: list[str]) -> int:
    """`confirm down|drain [NodeName=HOSTLIST]`: what the guard held back happens now."""
    from ranch.cli.keyvalue import parse_key_values
    from ranch.conf.hostlist import expand

    if not words:
        raise CliError("confirm: say what to confirm: down (nodes the DownGuard holds) or "
                       "drain (drains the DrainGuard paused) [NodeName=HOSTLIST]")
    guard = _guard_word("confirm", words[0])
    given = parse_key_values("confirm", words[1:], {"nodename": "NodeName", "nodes": "NodeName"},
                             "NodeName")
    nodes = given.get("NodeName", "")
    if nodes and nodes.upper() != "ALL":
        try:
            expand(nodes)
        except ValueError as exc:
            raise CliError(f"NodeName={nodes}: {exc}") from None
    body = {"action": "confirm", "guard": guard,
            "node_names": "" if nodes.upper() == "ALL" else nodes, "user": getpass.getuser()}
    return _report(ask(target, "GuardRequest", body, want="GuardStatus"), guard, "confirmed")


def reset(target: Target, words: list[str]) -> int:
    """`reset guard [down|drain]`: close the guard(s); both when none is named."""
    if not words or words[0].lower() not in ("guard", "guards"):
        raise CliError("reset: expected `reset guard [down|drain]`")
    if len(words) > 2:
        raise CliError("reset guard takes at most one guard: down or drain")
    guard = _guard_word("reset guard", words[1]) if len(words) == 2 else ""
    body = {"action": "reset", "guard": guard, "user": getpass.getuser()}
    return _report(ask(target, "GuardRequest", body, want="GuardStatus"), guard or "all",
                   "released")


def _report(reply: dict, guard: str, verb: str) -> int:
    from ranch.conf.hostlist import fold

    for err in reply.get("errors") or ():
        print(f"{prog('rcontrol')}: error: {err}", file=sys.stderr)
    changed = reply.get("changed") or ()
    if changed:
        print(f"{verb}: {fold(list(changed))}")
    for g in reply.get("guards") or ():
        if guard in ("all", g.get("guard", "").lower().removesuffix("guard")):
            print(f"{g.get('guard')} is {g.get('state')}")
    return 0 if reply.get("ok") is True else 1
