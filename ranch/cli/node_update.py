"""`rcontrol update NodeName=HOSTLIST State=STATE Reason=TEXT`: the words scontrol takes, checked
before anything is asked, and the controller's answer said as scontrol says it."""

from __future__ import annotations

import sys

from ranch.cli.controller import CliError, Target, ask
from ranch.cli.slurm_names import prog
from ranch.conf.hostlist import expand

UPDATE_KEYS = {"nodename": "NodeName", "nodes": "NodeName", "state": "State", "reason": "Reason"}


def parse_admin_state(text: str) -> str:
    from ranch.statemachine.events import parse_admin_state as parse

    return parse(text)


def parse_update(words: list[str]) -> tuple[str, str | None, str | None]:
    """(node expression, canonical State= word or None, Reason or None) from Key=Value words."""
    from ranch.cli.keyvalue import parse_key_values

    given = parse_key_values("update", words, UPDATE_KEYS,
                             "Ranch updates NodeName, State, Reason")
    node_expr, reason = given.get("NodeName"), given.get("Reason")
    state = None
    if "State" in given:
        try:
            state = parse_admin_state(given["State"])
        except ValueError as exc:
            raise CliError(str(exc)) from None
    if not node_expr:
        raise CliError("update: NodeName=HOSTLIST is required")
    if state is None and reason is None:
        raise CliError("update: nothing to change; give State= and/or Reason=")
    from ranch.statemachine.events import REASON_REQUIRED, REASON_REQUIRED_MESSAGE

    if state in REASON_REQUIRED and not (reason or "").strip():
        raise CliError(REASON_REQUIRED_MESSAGE)
    if node_expr.upper() != "ALL":
        try:
            expand(node_expr)
        except ValueError as exc:
            raise CliError(f"NodeName={node_expr}: {exc}") from None
    return node_expr, state, reason


def update_nodes(target: Target, node_expr: str, state: str | None, reason: str | None,
                 user: str, uid: int) -> int:
    """Ask for the update (as `user`); scontrol's lines for what was refused."""
    body = {
        "node_names": "ALL" if node_expr.upper() == "ALL" else node_expr,
        "state": state,
        "reason": reason,
        "user": user,
        "uid": uid,
    }
    result = ask(target, "UpdateNodes", body, want="UpdateResult")
    errors = result.get("errors") or ()
    if any(err.startswith("unknown node") for err in errors):
        # scontrol's line, which scripts match; the names follow on the next line.
        print("slurm_update error: Invalid node name specified", file=sys.stderr)
    for err in errors:
        print(f"{prog('rcontrol')}: error: {err}", file=sys.stderr)
    ok = result.get("ok") is True
    if not ok and not errors:
        print(f"{prog('rcontrol')}: error: the controller refused the update", file=sys.stderr)
    return 0 if ok else 1
