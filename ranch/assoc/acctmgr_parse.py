"""sacctmgr 22.05's command grammar (src/sacctmgr/sacctmgr.c, common.c): options, then
`VERB ENTITY [names] [where k=v...] [set k=v...] [format=...] [withassoc] [tree]`, every word
matched by its shortest unambiguous prefix as sacctmgr does."""

from __future__ import annotations

import attrs

VERBS = (("add", 3, "add"), ("create", 2, "add"), ("modify", 1, "modify"),
         ("update", 1, "modify"), ("delete", 3, "delete"), ("remove", 3, "delete"),
         ("show", 3, "show"), ("list", 3, "show"), ("dump", 3, "dump"), ("load", 2, "load"))
# each verb's entities (sacctmgr.c _add_it, _show_it, _modify_it, _delete_it): what this model
# holds; the others sacctmgr knows (coordinator, federation, resource, ...) are refused below
ENTITIES = {
    "add": (("account", 1, "account"), ("acct", 4, "account"), ("cluster", 2, "cluster"),
            ("qos", 1, "qos"), ("user", 1, "user")),
    "show": (("accounts", 2, "account"), ("acct", 4, "account"), ("associations", 2, "assoc"),
             ("clusters", 2, "cluster"), ("qos", 1, "qos"), ("users", 1, "user")),
    "modify": (("accounts", 1, "account"), ("acct", 4, "account"), ("qoss", 1, "qos"),
               ("users", 1, "user")),
    "delete": (("accounts", 1, "account"), ("acct", 4, "account"), ("qos", 2, "qos"),
               ("users", 1, "user")),
}
NO_ENTITY = {
    "add": ('No valid entity in add command\nInput line must include "Account", "Cluster", '
            '"Coordinator", "Federation", "QOS", "Resource", or "User"\n'),
    "show": ('No valid entity in list command\nInput line must include "Account", '
             '"Association", "Cluster", "Configuration",\n"Event", "Federation", "Problem", '
             '"QOS", "Resource", "Reservation",\n"RunAwayJobs", "Stats", "Transaction", "TRES", '
             '"User", or "WCKey"\n'),
    "modify": ('No valid entity in modify command\nInput line must include "Account", '
               '"Cluster", "Federation", "Job", "QOS", "Resource" or "User"\n'),
    "delete": ('No valid entity in delete command\nInput line must include "Account", '
               '"Cluster", "Coordinator", "Federation", "QOS", "Resource", or "User"\n'),
}


NAME_KEYS = {"user": ("name", "names", "user", "users"), "qos": ("name", "names"),
             "account": ("name", "names"), "cluster": ("name", "names")}


class Usage(ValueError):
    """A command sacctmgr cannot read: `text` is its stderr."""


@attrs.frozen
class Command:
    verb: str
    entity: str
    names: tuple[str, ...] = ()
    where: tuple[tuple[str, str], ...] = ()  # (key as typed, value)
    sets: tuple[tuple[str, str], ...] = ()
    format: tuple[str, ...] = ()
    withassoc: bool = False
    tree: bool = False


def match(word: str, table: tuple[tuple[str, int, str], ...]) -> str | None:
    """The canonical name whose first max(len(word), n) letters `word` spells (sacctmgr's
    xstrncasecmp(name, word, MAX(command_len, n)))."""
    w = word.lower()
    for name, least, canon in table:
        n = max(len(w), least)
        if name[:n] == w[:n] and len(w) <= len(name):
            return canon
    return None


def _pair(word: str) -> tuple[str, str] | None:
    if "=" not in word:
        return None
    key, _, value = word.partition("=")
    return key, value


def parse(words: list[str]) -> Command:
    if not words:
        raise Usage("")
    verb = match(words[0], VERBS)
    if verb is None:
        raise Usage(f"invalid keyword: {words[0]}\n")
    if verb in ("dump", "load"):  # their own words: a cluster or file name, File=, Cluster=
        pairs = tuple(_pair(w) or ("", w) for w in words[1:])
        return Command(verb, "file", where=pairs)
    entity = match(words[1], ENTITIES[verb]) if len(words) > 1 else None
    if entity is None:
        raise Usage(NO_ENTITY[verb])
    names: list[str] = []
    where: list[tuple[str, str]] = []
    sets: list[tuple[str, str]] = []
    fmt: list[str] = []
    withassoc = tree = False
    into = where if verb in ("modify", "delete", "show") else sets
    for word in words[2:]:
        low = word.lower()
        if low == "where":
            into = where
            continue
        if low == "set":
            into = sets
            continue
        if low == "withassoc" or (verb == "show" and low == "withassocs"):
            withassoc = True
            continue
        if low == "tree":
            tree = True
            continue
        pair = _pair(word)
        if pair is None:
            names += [n for n in word.split(",") if n]
        elif match(pair[0], (("format", 3, "format"),)):
            fmt += [f for f in pair[1].split(",") if f]
        elif pair[0].lower() in NAME_KEYS.get(entity, ("name", "names")):
            names += [n for n in pair[1].split(",") if n]
        else:
            into.append(pair)
    return Command(verb, entity, tuple(names), tuple(where), tuple(sets), tuple(fmt),
                   withassoc, tree)
