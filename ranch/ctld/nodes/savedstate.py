"""What the state file and the journal hold of the cluster's nodes: each node's entry (encoded
once per change), the records of changes not yet journalled, the state-file document, and taking
a saved state back at start. The jobs' part is the job store's (ctld/jobs/store.py)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from ranch.ctld import logs
from ranch.ctld.kept import kept
from ranch.ctld.nodes import membership
from ranch.ctld.nodes.hardware import PackedHardware
from ranch.ctld.nodes.node import NodeRecord
from ranch.protocol import messages as m
from ranch.protocol.codec import converter
from ranch.statemachine import names
from ranch.statemachine.model import Base, Flag, NodeState, Reason, ReasonSource

if TYPE_CHECKING:
    from ranch.ctld.ports import Registry
    from ranch.ctld.state.changelog import Taken


def _reason_from_json(d: dict[str, Any] | None) -> Reason | None:
    if not d:
        return None
    src = d.get("source", "ADMIN")
    source = ReasonSource[src] if src in ReasonSource.__members__ else ReasonSource(src)
    return Reason(source=source, text=d.get("text", ""), time=float(d.get("time") or 0.0),
                  user=d.get("user"))


def state_from_json(name: str, cpus: int, d: dict[str, Any]) -> NodeState:
    """A saved state back into a NodeState (tolerant of how statemachine spells enums)."""
    base = d["base"]
    flags = frozenset(
        Flag[f] if f in Flag.__members__ else Flag(f) for f in d.get("flags", ())
    )
    return NodeState(
        name=name,
        base=Base[base] if base in Base.__members__ else Base(base),
        flags=flags,
        reason=_reason_from_json(d.get("reason")),
        cpus_total=int(d.get("cpus_total", cpus)),
        cpus_alloc=int(d.get("cpus_alloc", 0)),
    )


def restore(c: Registry, doc: dict[str, Any]) -> tuple[str, ...]:
    """Take back the saved state; log every node that is saved but gone, or new. Returns the
    nodes the saved state knew."""
    saved = doc.get("nodes", {})
    now = c.clock()
    for name, entry in saved.items():
        node = c.nodes.get(name) or membership.restore_dynamic(c, name, entry)
        if node is None:
            logs.event("saved node is no longer in the config; dropped", logging.WARNING,
                       node=name)
            continue
        try:
            state = state_from_json(name, node.cfg.cpus, entry["state"])
        except (KeyError, ValueError, TypeError) as exc:
            logs.event("saved node state unreadable; starting it fresh", logging.WARNING,
                       node=name, error=repr(exc))
            continue
        node.set_state(state)
        hw = entry.get("hardware")
        node.hardware = c.hardware.pack(converter.structure(hw, m.Hardware)) if hw else None
        node.boot_time = entry.get("boot_time")
        node.last_registration = entry.get("last_registration")
        node.slurmd_start_time = entry.get("slurmd_start_time")
        node.version = entry.get("version", "")
        node.last_busy = entry.get("last_busy")
        node.power_started = entry.get("power_started")
        node.power_action = entry.get("power_action")
        node.last_change = entry.get("last_change")
        node.unhealthy_boots = int(entry.get("unhealthy_boots") or 0)
        node.last_heard = now
    for name in c.nodes:
        if name not in saved:
            logs.event("node not in the saved state; starting it from the config",
                       node=name)
    restored = tuple(n for n in saved if n in c.nodes)
    c.liveness.restored(doc.get("saved_at"))
    logs.event("state restored", nodes=len(saved), saved_at=doc.get("saved_at"))
    c.jobs.store.restore(doc.get("jobs"))
    c.reservations.restore(doc.get("reservations"))
    c.changed_all()
    return restored


def node_entry(node: NodeRecord) -> orjson.Fragment:
    """The node's state-file entry (also its journal record)."""
    return _joined(node.hardware, _rest(node))


class SavedEntry:
    """A node's state-file entry in a snapshot document: its parts as they were when the
    snapshot was built (both immutable), joined where the document is encoded
    (ctld/state/deferred.py). Inflating 10,000 nodes' hardware took 20 ms of the event loop."""

    __slots__ = ("hardware", "rest")

    def __init__(self, hardware: PackedHardware | None, rest: bytes) -> None:
        self.hardware = hardware
        self.rest = rest

    def fragment(self) -> orjson.Fragment:
        return _joined(self.hardware, self.rest)


def _rest(node: NodeRecord) -> bytes:
    """All of the entry but the hardware: encoded once per change and kept."""
    rest = node.saved
    if rest is None:
        st = node.state
        state = names.to_json(st, hidden=True)
        state["cpus_total"] = st.cpus_total
        state["cpus_alloc"] = st.cpus_alloc
        rest = node.saved = kept(orjson.dumps({
            "state": state,
            "boot_time": node.boot_time,
            "last_registration": node.last_registration,
            "slurmd_start_time": node.slurmd_start_time,
            "version": node.version,
            "last_busy": node.last_busy,
            "power_started": node.power_started,
            "power_action": node.power_action,
            "dynamic_conf": node.dynamic_conf,  # not None: a dynamic node (membership)
            "last_change": node.last_change,
            "unhealthy_boots": node.unhealthy_boots,
        }))
    return rest


def _joined(hw: PackedHardware | None, rest: bytes) -> orjson.Fragment:
    """The hardware (kept deflated: ctld/nodes/hardware.py) joined to the rest of the entry,
    rather than kept a second time in every node's cache."""
    return orjson.Fragment(b"".join((b'{"hardware":', b"null" if hw is None else hw.json(), b",",
                                     memoryview(rest)[1:])))


def journal_records(c: Registry, taken: Taken) -> list[dict[str, Any]]:
    """The journal records of changes taken from the change log (ctld/state/changelog.py)."""
    records: list[dict[str, Any]] = [
        {"node": name, "entry": node_entry(c.nodes[name])}
        for name, node in taken.nodes.items() if c.nodes.get(name) is node]
    records += c.jobs.store.journal_records(taken)  # the job side writes its own
    records += [{"resv": name, "entry": rec} for name, rec in taken.reservations.items()]
    return records


def save_doc(c: Registry) -> dict[str, Any]:
    """The state-file document, for ctld/state/deferred.py's dumps: each node's entry is encoded
    once, when the node changed, and kept (bytes, nothing for the collector to walk); its
    hardware is joined to it when the document is encoded."""
    c.changes.saved()
    out = {name: SavedEntry(node.hardware, _rest(node)) for name, node in c.nodes.items()}
    return {"saved_at": c.wall(), "config_hash": c.config.config_hash, "nodes": out,
            "jobs": c.jobs.store.save_doc(), "reservations": c.reservations.save_doc()}
