"""What the state file and the journal hold of the cluster's nodes: each node's entry (encoded
once per change), the node records of changes not yet journalled, the nodes' part of the
state-file document, and taking them back at start. The jobs' part is the job side's, the
reservations' their owner's (ctld/nodes/reservations.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from ranch.ctld import logs
from ranch.ctld.kept import kept
from ranch.ctld.nodes.hardware import HardwareShelf, PackedHardware
from ranch.ctld.nodes.node import NodeRecord
from ranch.protocol import messages as m
from ranch.protocol.codec import converter
from ranch.statemachine import names
from ranch.statemachine.model import Base, Flag, NodeState, Reason, ReasonSource

if TYPE_CHECKING:
    from ranch.ctld.state.changelog import Taken

# a dynamic node saved with the state, made again (ctld/nodes/membership.py restore_dynamic)
Remake = Callable[[str, dict[str, Any]], "NodeRecord | None"]


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


def restore(nodes: Mapping[str, NodeRecord], doc: dict[str, Any], *, now: float,
            hardware: HardwareShelf, remake: Remake) -> tuple[str, ...]:
    """Take back the saved nodes; log every node that is saved but gone, or new. Returns the
    nodes the saved state knew."""
    saved = doc.get("nodes", {})
    for name, entry in saved.items():
        node = nodes.get(name) or remake(name, entry)
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
        _restore_fields(node, entry, hardware)
        node.last_heard = now
    for name in nodes:
        if name not in saved:
            logs.event("node not in the saved state; starting it from the config",
                       node=name)
    logs.event("state restored", nodes=len(saved), saved_at=doc.get("saved_at"))
    return tuple(n for n in saved if n in nodes)


def _restore_fields(node: NodeRecord, entry: dict[str, Any], hardware: HardwareShelf) -> None:
    hw = entry.get("hardware")
    node.hardware = hardware.pack(converter.structure(hw, m.Hardware)) if hw else None
    node.boot_time = entry.get("boot_time")
    node.last_registration = entry.get("last_registration")
    node.slurmd_start_time = entry.get("slurmd_start_time")
    node.version = entry.get("version", "")
    node.last_busy = entry.get("last_busy")
    node.power_started = entry.get("power_started")
    node.power_action = entry.get("power_action")
    node.last_change = entry.get("last_change")
    node.unhealthy_boots = int(entry.get("unhealthy_boots") or 0)


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


def journal_records(nodes: Mapping[str, NodeRecord], taken: Taken) -> list[dict[str, Any]]:
    """The journal records of the nodes taken from the change log (ctld/state/changelog.py)."""
    return [{"node": name, "entry": node_entry(nodes[name])}
            for name, node in taken.nodes.items() if nodes.get(name) is node]


def save_doc(nodes: Mapping[str, NodeRecord], saved_at: float,
             config_hash: str) -> dict[str, Any]:
    """The nodes' part of the state-file document, for ctld/state/deferred.py's dumps: each
    node's entry is encoded once, when the node changed, and kept (bytes, nothing for the
    collector to walk); its hardware is joined to it when the document is encoded."""
    out = {name: SavedEntry(node.hardware, _rest(node)) for name, node in nodes.items()}
    return {"saved_at": saved_at, "config_hash": config_hash, "nodes": out}
