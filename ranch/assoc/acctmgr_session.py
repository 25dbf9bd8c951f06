"""One sacctmgr command line over an AcctDb once its options are read, as sacctmgr 22.05 answers
it: the verb, stdout, stderr and exit status. Pure: rctld runs it over the tree it keeps
(ctld/accounts/), the conformance driver over one of its own (cli/acctmgr_session.respond)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from ranch.assoc import ops
from ranch.assoc.acctmgr_ask import Reply
from ranch.assoc.acctmgr_change import delete, modify
from ranch.assoc.acctmgr_dump import dump
from ranch.assoc.acctmgr_fields import UnknownField
from ranch.assoc.acctmgr_load import load
from ranch.assoc.acctmgr_parse import Usage, parse
from ranch.assoc.acctmgr_show import show
from ranch.assoc.acctmgr_values import BadValue
from ranch.assoc.acctmgr_verbs import add
from ranch.assoc.db import AcctDb, Refused


def answer(words: list[str], values: Mapping[str, object], db: AcctDb,
           stdin: str | None = None, known_user: Callable[[str], bool] = lambda name: True,
           caller: str = "root", read: Callable[[str], str] | None = None,
           uid: int = 0) -> Reply:
    """`words`: the command line without its options; `values`: the options given, by long
    name (immediate, parsable, parsable2, noheader, associations, readonly); the rest as
    cli/acctmgr_session.respond says."""
    parsable = "P" if values.get("parsable2") else "p" if values.get("parsable") else ""
    try:
        cmd = parse(words)
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


def load_path(words: list[str]) -> str | None:
    """The file `load` reads, or None (not a load, or no file named): racctmgr reads it where
    it runs, as sacctmgr does, and sends its text."""
    try:
        cmd = parse(words)
    except (Usage, UnknownField, BadValue):
        return None
    if cmd.verb != "load":
        return None
    return next((v for k, v in cmd.where if not k or "file".startswith(k.lower())), None)


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
