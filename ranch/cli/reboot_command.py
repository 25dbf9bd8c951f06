"""rcontrol reboot / cancel_reboot: scontrol's words, sent to the controller (issue 33)."""

from __future__ import annotations

import getpass
import sys

from ranch.cli.controller import CliError, Target, ask
from ranch.cli.slurm_names import prog
from ranch.conf.hostlist import expand

NEXT_STATES = {"DOWN": "DOWN", "RESUME": "RESUME"}


def parse_reboot(words: list[str]) -> dict:
    """`[ASAP] [nextstate=RESUME|DOWN] [reason=TEXT] NODES|ALL`, options in any order first (as
    scontrol reads them: at most three, then the node list)."""
    asap, reason, next_state = False, None, None
    rest = list(words)
    while rest and len(words) - len(rest) < 3:
        word = rest[0]
        low = word.lower()
        if low == "asap":
            asap = True
        elif low.startswith("reason="):
            reason = word.split("=", 1)[1]
            if not reason:
                raise CliError("missing reason")
        elif low.startswith("nextstate="):
            value = word.split("=", 1)[1].upper()
            if not value:
                raise CliError("missing state")
            hits = [s for s in NEXT_STATES if s.startswith(value)]
            if len(hits) != 1:
                raise CliError(f"Invalid state: {word.split('=', 1)[1]}\nValid states: DOWN, "
                               "RESUME")
            next_state = hits[0]
        else:
            break
        rest.pop(0)
    if len(rest) > 1:
        raise CliError("too many arguments for keyword:reboot")
    if not rest:
        raise CliError("Missing node list. Specify ALL|<NodeList>")
    nodes = rest[0]
    if nodes.upper() != "ALL":
        try:
            expand(nodes)
        except ValueError as exc:
            raise CliError(f"{nodes}: {exc}", code=2) from None
    return {"node_names": "ALL" if nodes.upper() == "ALL" else nodes, "asap": asap,
            "next_state": next_state, "reason": reason, "user": getpass.getuser()}


def _report(result: dict, slurm_line: str) -> int:
    errors = result.get("errors") or ()
    if any(e.startswith("unknown node") for e in errors):
        print(f"{slurm_line}: Invalid node name specified", file=sys.stderr)
    for err in errors:
        print(f"{prog('rcontrol')}: error: {err}", file=sys.stderr)
    return 0 if result.get("ok") is True else 1


def reboot(target: Target, words: list[str]) -> int:
    body = parse_reboot(words)
    result = ask(target, "RebootNodes", body, want="UpdateResult")
    rc = _report(result, "scontrol_reboot_nodes error")
    if "RebootProgram isn't defined" in (result.get("errors") or ()):
        print("scontrol_reboot_nodes error: Unspecified error", file=sys.stderr)  # scontrol's
    return rc


def cancel_reboot(target: Target, words: list[str]) -> int:
    """scontrol's cancel_reboot: State=CANCEL_REBOOT on the nodes."""
    import os

    if len(words) != 1:
        raise CliError(("too many" if words else "missing") + " argument"
                       + ("s" if words else "") + " for keyword:cancel_reboot")
    body = {"node_names": words[0], "state": "CANCEL_REBOOT", "reason": None,
            "user": getpass.getuser(), "uid": os.getuid()}
    result = ask(target, "UpdateNodes", body, want="UpdateResult")
    if not result.get("ok") and not any(e.startswith("unknown node")
                                        for e in result.get("errors") or ()):
        print("slurm_update error: Invalid node state specified", file=sys.stderr)
    return _report(result, "slurm_update error")
