"""The web page's feed: every node of a metrics snapshot in a few columns, small enough to poll.

The page draws 10,000 nodes from this (about 40 bytes a node, before gzip) and asks
/ui/node/NAME, the API's own node record, for one node's details. Built once per snapshot.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import orjson

from ranch.protocol.records import reason_user

CHUNK = 1000  # nodes between two chances for heartbeats to run


def _pct(used: float | None, total: float | None) -> int:
    return round(100.0 * used / total) if used is not None and total else -1


def node_columns(rec: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """(cpu %, memory %, mean GPU util %, hottest °C, heartbeat age s); -1 where unknown."""
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


def health_note(rec: dict[str, Any]) -> str:
    """The health verdict and warnings in one line ("" when all is well)."""
    h = rec.get("health") or {}
    notes = list(h.get("warnings") or ())
    if h.get("verdict") not in (None, "ok"):
        notes.insert(0, f"{h['verdict'].upper()}: {h.get('message') or ''}".rstrip(": "))
    return "; ".join(notes)


class Feed:
    """Encodes a snapshot's nodes once; the same bytes serve every poll of that snapshot."""

    def __init__(self) -> None:
        self._for: Any = None
        self._body = b""
        self._gz: bytes | None = None

    def gzipped(self, snap: Any) -> bytes:
        """The feed gzip-compressed (a tenth of the bytes), also made once per snapshot."""
        body = self.build(snap)
        if self._gz is None:
            c = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: gzip framing
            self._gz = c.compress(body) + c.flush()
        return self._gz

    def build(self, snap: Any) -> bytes:
        for _ in self.steps(snap):
            pass
        return self._body

    def steps(self, snap: Any) -> Iterator[None]:
        """Build the feed of `snap` (unless it is built), yielding every CHUNK nodes."""
        if snap is self._for:
            return
        states: dict[str, int] = {}
        notes: dict[str, int] = {"": 0}
        reasons: dict[tuple, int] = {}
        names, state, reason, cpu, mem, gpu, temp, age, health, cpus = ([] for _ in range(10))
        for i, rec in enumerate(snap.nodes):
            if i % CHUNK == CHUNK - 1:
                yield
            names.append(rec["name"])
            state.append(states.setdefault(rec["long"], len(states)))
            r = rec["state"].get("reason")
            if r and r.get("text"):
                key = (r["text"], reason_user(r), int(r.get("time") or 0), r.get("source"))
                reason.append(reasons.setdefault(key, len(reasons)))
            else:
                reason.append(-1)
            c, mm, g, t, a = node_columns(rec)
            cpu.append(c)
            mem.append(mm)
            gpu.append(g)
            temp.append(t)
            age.append(a)
            health.append(notes.setdefault(health_note(rec), len(notes)))
            cpus.append([rec["cpus_alloc"], rec["cpus"]])
        index = {n: i for i, n in enumerate(names)}
        doc = {
            "cluster": snap.cluster_name,
            "generated_at": snap.generated_at,
            "states": list(states),
            "reasons": [list(k) for k in reasons],
            "notes": list(notes),
            "partitions": [
                {"name": p["name"], "members": [index[n] for n in p["nodes"] if n in index]}
                for p in snap.partitions
            ],
            "nodes": {"name": names, "state": state, "reason": reason, "cpu": cpu, "mem": mem,
                      "gpu": gpu, "temp": temp, "age": age, "health": health, "cpus": cpus},
        }
        self._for, self._body, self._gz = snap, orjson.dumps(doc), None
