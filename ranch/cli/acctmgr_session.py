"""One sacctmgr command line over an AcctDb, as sacctmgr 22.05 answers it: its options read as
getopt_long reads them, then the command (assoc/acctmgr_session.answer). Pure: the conformance
driver holds the db; racctmgr sends the same words and options to rctld."""

from __future__ import annotations

from collections.abc import Callable

from ranch.assoc.acctmgr_ask import Reply
from ranch.assoc.acctmgr_session import answer
from ranch.assoc.db import AcctDb
from ranch.cli import sbatch_options as so
from ranch.cli.racctmgr import OPTIONS


def split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(options, words): getopt_long permutes, so an option may follow the command's words."""
    flags = [w for w in argv if w.startswith("-") and w != "-"]
    words = [w for w in argv if not (w.startswith("-") and w != "-")]
    return flags, words


def respond(argv: list[str], db: AcctDb, stdin: str | None = None,
            known_user: Callable[[str], bool] = lambda name: True,
            caller: str = "root", read: Callable[[str], str] | None = None,
            uid: int = 0) -> Reply:
    """`stdin`: what the user types at sacctmgr's questions (None: nothing, in 30 s);
    `known_user`: whether the system knows a user name (sacctmgr asks before adding one it
    does not); `caller`: who runs it (changes need an AdminLevel; reads do not); `read`: a
    file's text for `load` (sacctmgr reads it where it runs); `uid`: the caller's, for load's
    refusal of a caller the tree does not know."""
    flags, words = split(argv)
    try:
        values, _ = so.parse(flags, options=OPTIONS)
    except so.OptionError as exc:
        return Reply(db, err=f"sacctmgr: {exc}\n", rc=1)
    return answer(words, values, db, stdin, known_user, caller, read, uid)
