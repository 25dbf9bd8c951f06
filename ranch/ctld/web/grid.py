"""The web page's feed: every node in a few columns, small enough to poll.

The page draws 10,000 nodes from this (about 40 bytes a node, before gzip) and asks
/ui/node/NAME, the API's own node record, for one node's details. Built straight from the
node records, a chunk at a time with a checkpoint between (no whole-cluster snapshot built in one
go on the loop), and once per version: every page that asks for the same version gets the same
bytes (plain and gzipped), so ten open pages cost one build.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from ranch.ctld.nodes.node import PACKED_HEAD, PER_GPU, NodeRecord
from ranch.protocol.records import reason_user
from ranch.statemachine import names as state_names

CHUNK = 250  # nodes between two chances for heartbeats to run (a few ms of work)
ZCHUNK = 1 << 16  # bytes gzipped between two chances


def _pct(used: float | None, total: float | None) -> int:
    return round(100.0 * used / total) if used is not None and total else -1


def node_columns(rec: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """(cpu %, memory %, mean GPU util %, hottest °C, heartbeat age s) of a snapshot record
    with metrics; -1 where unknown."""
    mt = rec.get("metrics")
    if not mt:
        return -1, -1, -1, -1, -1
    gpus = mt.get("gpus") or ()
    gpu = round(sum(g["util_pct"] for g in gpus) / len(gpus)) if gpus else -1
    temps = [g["temp_c"] for g in gpus if g.get("temp_c") is not None]
    if mt.get("max_temp_c") is not None:
        temps.append(mt["max_temp_c"])
    age = mt.get("heartbeat_age_s")
    return (
        -1 if mt.get("cpu_pct") is None else round(mt["cpu_pct"]),
        _pct(mt.get("mem_used_mib"), mt.get("mem_total_mib")),
        gpu,
        round(max(temps)) if temps else -1,
        -1 if age is None else round(age),
    )


def packed_columns(packed: Any) -> tuple[int, int, int, int]:
    """(cpu %, memory %, mean GPU util %, hottest °C) straight from a node's packed metrics
    (what node_columns reads from the record metrics_record unpacks; NaN: not measured)."""
    utils = packed[PACKED_HEAD + 1::PER_GPU]
    temps = [t for t in packed[PACKED_HEAD + 4::PER_GPU] if t == t]
    if packed[4] == packed[4]:
        temps.append(packed[4])
    return (-1 if packed[0] != packed[0] else round(packed[0]), _pct(packed[2], packed[3]),
            round(sum(utils) / len(utils)) if utils else -1,
            round(max(temps)) if temps else -1)


def health_note(rec: dict[str, Any]) -> str:
    """The health verdict and warnings in one line ("" when all is well)."""
    h = rec.get("health") or {}
    notes = list(h.get("warnings") or ())
    if h.get("verdict") not in (None, "ok"):
        notes.insert(0, f"{h['verdict'].upper()}: {h.get('message') or ''}".rstrip(": "))
    return "; ".join(notes)


def _state_part(node: NodeRecord) -> tuple[str, tuple | None, str]:
    """(sinfo's long state, reason key or None, health note) of a node."""
    st, h = node.state, node.health
    r = state_names.reason_to_json(st.reason)
    reason = ((r["text"], reason_user(r), int(r.get("time") or 0), r.get("source"))
              if r and r.get("text") else None)
    note = health_note({"health": {"verdict": h.verdict, "message": h.message,
                                   "warnings": list(h.warnings)} if h else None})
    return state_names.long(st), reason, note


class Feed:
    """Encodes the nodes once per version; the same bytes serve every poll of that version."""

    def __init__(self) -> None:
        self.version: Any = None  # what the body was built for (the caller's key)
        self.etag = ""
        self._body = b""
        self._gz = b""
        self._builds = 0
        # per node: (state, health, their part; packed metrics, their columns): each part
        # recomputed only when what it is made of is replaced
        self._parts: dict[str, tuple[Any, ...]] = {}

    def body(self, gzipped: bool) -> bytes:
        return self._gz if gzipped else self._body

    def steps(self, version: Any, nodes: Mapping[str, NodeRecord], partitions: list[str],
              cluster: str, wall: float) -> Iterator[None]:
        """Build the feed of `nodes` for `version` (unless it is built), yielding every CHUNK
        nodes; `partitions`: their names in the config's order."""
        if version == self.version:
            return
        states: dict[str, int] = {}
        notes: dict[str, int] = {"": 0}
        reasons: dict[tuple, int] = {}
        members: dict[str, list[int]] = {p: [] for p in partitions}
        cols: dict[str, list[Any]] = {k: [] for k in (
            "name", "state", "reason", "cpu", "mem", "gpu", "temp", "age", "health", "cpus")}
        name_, state_, reason_, cpu_, mem_, gpu_, temp_, age_, health_, cpus_ = cols.values()
        parts = self._parts
        for i, node in enumerate(list(nodes.values())):
            if i % CHUNK == CHUNK - 1:
                yield
            name = node.cfg.name
            got = parts.get(name)
            if got is None or got[0] is not node.state or got[1] is not node.health:
                got = parts[name] = (node.state, node.health, _state_part(node), None, None)
            if got[3] is not node.metrics:  # a heartbeat packs a new array (nodetraffic.py)
                got = parts[name] = (*got[:3], node.metrics, None if node.metrics is None
                                     else packed_columns(node.metrics))
            (long, reason, note), figures = got[2], got[4]
            name_.append(name)
            state_.append(states.setdefault(long, len(states)))
            reason_.append(-1 if reason is None else reasons.setdefault(reason, len(reasons)))
            health_.append(notes.setdefault(note, len(notes)))
            cpus_.append([node.state.cpus_alloc, node.cfg.cpus])
            for p in node.partitions:
                members.setdefault(p, []).append(i)
            if figures is None:
                c = mm = g = t = a = -1
            else:
                c, mm, g, t = figures
                hb = node.last_heartbeat
                a = -1 if hb is None else round(max(0.0, wall - hb))
            cpu_.append(c)
            mem_.append(mm)
            gpu_.append(g)
            temp_.append(t)
            age_.append(a)
        doc = {
            "cluster": cluster, "generated_at": wall, "states": list(states),
            "reasons": [list(k) for k in reasons], "notes": list(notes),
            "partitions": [{"name": p, "members": ix} for p, ix in members.items()],
            "nodes": cols,
        }
        body = orjson.dumps(doc)
        # gzipped too (a tenth of the bytes: every browser asks for it), a slice at a time
        z, gz = zlib.compressobj(6, zlib.DEFLATED, 31), []  # 31: gzip framing
        for at in range(0, len(body), ZCHUNK):
            yield
            gz.append(z.compress(body[at:at + ZCHUNK]))
        gz.append(z.flush())
        self._builds += 1
        self.version, self._body, self._gz = version, body, b"".join(gz)
        self.etag = f'"{self._builds}-{wall!r}"'
