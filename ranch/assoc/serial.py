"""AcctDb to and from plain JSON dicts (for a journal), with a version; a damaged record is
refused with a ValueError that names the field."""

from __future__ import annotations

from typing import Any

import attrs

from ranch.assoc.db import AcctDb
from ranch.assoc.records import ADMIN_LEVELS, Account, Assoc, Cluster, Qos, User

VERSION = 1
KINDS: dict[str, type] = {"clusters": Cluster, "accounts": Account, "users": User,
                          "assocs": Assoc, "qos": Qos}
TUPLES = {"qos", "flags", "preempt"}  # list fields that are tuples of str


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def to_json(db: AcctDb) -> dict[str, Any]:
    out: dict[str, Any] = {"version": VERSION, "next_id": db.next_id, "next_seq": db.next_seq}
    for kind in KINDS:
        out[kind] = [{k: _plain(v) for k, v in attrs.asdict(r, recurse=False).items()}
                     for r in getattr(db, kind)]
    return out


def _field(kind: str, i: int, cls: type, f: attrs.Attribute, raw: Any) -> Any:
    where = f"{kind}[{i}].{f.name}"
    if f.name == "limits":
        if not isinstance(raw, list) or not all(
                isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
                for p in raw):
            raise ValueError(f"accounting record {where}: not a list of [name, value] pairs")
        return tuple(sorted((p[0], p[1]) for p in raw))
    if f.name in TUPLES:
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            raise ValueError(f"accounting record {where}: not a list of names")
        return tuple(raw)
    types: dict[str, type | tuple[type, ...]] = {"int": int, "float": (int, float), "str": str}
    want = types[str(f.type)]
    if isinstance(raw, bool) or not isinstance(raw, want):
        raise ValueError(f"accounting record {where}: {raw!r} is not a {f.type}")
    if cls is User and f.name == "admin_level" and raw not in ADMIN_LEVELS:
        raise ValueError(f"accounting record {where}: {raw!r} is not an admin level")
    return float(raw) if isinstance(raw, int | float) and str(f.type) == "float" else raw


def _record(kind: str, i: int, cls: type, raw: Any) -> Any:
    if not isinstance(raw, dict):
        raise ValueError(f"accounting record {kind}[{i}]: not an object")
    values = {}
    for f in attrs.fields(cls):
        if f.name not in raw:
            raise ValueError(f"accounting record {kind}[{i}].{f.name}: missing")
        values[f.name] = _field(kind, i, cls, f, raw[f.name])
    extra = set(raw) - set(values)
    if extra:
        raise ValueError(f"accounting record {kind}[{i}].{sorted(extra)[0]}: unknown field")
    return cls(**values)


def from_json(raw: Any) -> AcctDb:
    if not isinstance(raw, dict):
        raise ValueError("accounting record: not an object")
    if raw.get("version") != VERSION:
        raise ValueError(f"accounting record version: {raw.get('version')!r}, not {VERSION}")
    kinds = {}
    for kind, cls in KINDS.items():
        if not isinstance(raw.get(kind), list):
            raise ValueError(f"accounting record {kind}: not a list")
        kinds[kind] = tuple(_record(kind, i, cls, r) for i, r in enumerate(raw[kind]))
    for name in ("next_id", "next_seq"):
        if isinstance(raw.get(name), bool) or not isinstance(raw.get(name), int):
            raise ValueError(f"accounting record {name}: not an integer")
    return AcctDb(next_id=raw["next_id"], next_seq=raw["next_seq"], **kinds)
