"""One sacctmgr command line over an AcctDb, as sacctmgr 22.05 answers it: options, the verb,
stdout, stderr and exit status. Pure: the caller holds the db (rctld's store, once wired)."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from ranch.assoc import ops
from ranch.assoc.db import AcctDb, Refused
from ranch.cli import sbatch_options as so
from ranch.cli.acctmgr_ask import Reply
from ranch.cli.acctmgr_change import delete, modify
from ranch.cli.acctmgr_dump import dump
from ranch.cli.acctmgr_fields import UnknownField
from ranch.cli.acctmgr_load import load
from ranch.cli.acctmgr_parse import Usage, parse
from ranch.cli.acctmgr_show import show
from ranch.cli.acctmgr_values import BadValue
from ranch.cli.acctmgr_verbs import add
from ranch.cli.racctmgr import OPTIONS


def respond(argv: list[str], db: AcctDb, stdin: str | None = None,
            known_user: Callable[[str], bool] = lambda name: True,
            caller: str = "root", read: Callable[[str], str] | None = None,
            uid: int = 0) -> Reply:
    """`stdin`: what the user types at sacctmgr's questions (None: nothing, in 30 s);
    `known_user`: whether the system knows a user name (sacctmgr asks before adding one it
    does not); `caller`: who runs it (changes need an AdminLevel; reads do not); `read`: a
    file's text for `load` (sacctmgr reads it where it runs); `uid`: the caller's, for load's
    refusal of a caller the tree does not know."""
    # getopt_long permutes: an option may follow the command's words
    flags = [w for w in argv if w.startswith("-") and w != "-"]
    words = [w for w in argv if not (w.startswith("-") and w != "-")]
    try:
        values, _ = so.parse(flags, options=OPTIONS)
        rest = words
    except so.OptionError as exc:
        return Reply(db, err=f"sacctmgr: {exc}\n", rc=1)
    parsable = "P" if values.get("parsable2") else "p" if values.get("parsable") else ""
    try:
        cmd = parse(rest)
        if values.get("associations"):  # -s: as `withassoc`
            cmd = attrs.evolve(cmd, withassoc=True)
        if cmd.verb == "dump":
            out, err, rc, files = dump(db, cmd.where)
            return Reply(db, out, err, rc, files=files)
        if cmd.verb == "load":
            return _load(db, cmd, values, stdin, (caller, uid), read)
        if cmd.verb == "show":
            return Reply(db, show(db, cmd, header=not values.get("noheader"), parsable=parsable))
        immediate = bool(values.get("immediate"))
        if values.get("readonly"):
            return Reply(db, err="Can't run this command in readonly mode.\n", rc=1)
        if cmd.verb == "add":
            return add(db, cmd, immediate, stdin, known_user, caller)
        if cmd.verb == "modify":
            return modify(db, cmd, immediate, stdin, caller)
        return delete(db, cmd, immediate, stdin, caller)
    except Refused as exc:
        return Reply(db, exc.out, exc.err, 1)
    except (Usage, UnknownField, BadValue) as exc:
        return Reply(db, err=str(exc), rc=1)


def _load(db: AcctDb, cmd, values, stdin: str | None, caller: tuple[str, int],
          read: Callable[[str], str] | None) -> Reply:
    word, path = next(((f"{k}={v}" if k else v, v) for k, v in cmd.where
                       if not k or "file".startswith(k.lower())), ("", ""))
    if not path:
        return Reply(db, err=" No filename given, specify one with file=''\n", rc=1)
    try:
        if read is None:
            raise OSError("No such file or directory")
        text = read(path)
    except OSError as exc:
        return Reply(db, err=f' Unable to read "{word}": {exc.strerror or exc}\n', rc=1)
    name, uid = caller
    if name != "root" and db.user(name) is None:  # file_functions.c: Administrators only
        return Reply(db, err=f" Your uid ({uid}) is not in the accounting system, can't load "
                             "file.\n", rc=1)
    if not ops.may(db, name, "Administrator"):
        return Reply(db, err=" Your user does not have sufficient privileges to load files.\n",
                     rc=1)
    return load(db, text, bool(values.get("immediate")), stdin)
