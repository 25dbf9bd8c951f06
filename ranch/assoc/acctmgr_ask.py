"""sacctmgr's questions (common.c commit_check) over a given stdin text: each reads characters
until Y, y, N, n or a newline, printing "(N/y): " and a newline after each; None is a terminal
where nobody answers in 30 s ("timeout")."""

from __future__ import annotations

import attrs

from ranch.assoc.db import AcctDb

COMMIT = "Would you like to commit changes?"
PROMPT = "(N/y): "
# what a question nobody answered leaves in stdout: rctld reads it as "ask racctmgr's user"
UNANSWERED = PROMPT + "timeout\n"


@attrs.frozen
class Reply:
    db: AcctDb
    out: str = ""
    err: str = ""
    rc: int = 0
    stdin: str | None = None  # what the questions left unread
    files: tuple[tuple[str, str], ...] = ()  # (path, text) for the caller to write (dump)


def ask(warning: str, stdin: str | None) -> tuple[str, bool, str | None]:
    """(what sacctmgr prints, whether the answer was yes, the stdin left)."""
    out = f"{warning} (You have 30 seconds to decide)\n"
    c = ""
    while c not in ("Y", "y", "N", "n", "\n"):
        if c:
            out += "Y or N please\n"
        out += PROMPT
        if not stdin:  # nothing to read: select() times out (EOF would spin: taken as the same)
            return out + UNANSWERED[len(PROMPT):], False, stdin
        c, stdin = stdin[0], stdin[1:]
        out += "\n"
    return out, c in ("Y", "y"), stdin


def commit(before: AcctDb, after: AcctDb, out: str, immediate: bool,
           stdin: str | None) -> Reply:
    """The change is kept with -i, or when the user says y."""
    if immediate:
        return Reply(after, out, stdin=stdin)
    text, yes, stdin = ask(COMMIT, stdin)
    if yes:
        return Reply(after, out + text, stdin=stdin)
    return Reply(before, out + text + " Changes Discarded\n", stdin=stdin)
