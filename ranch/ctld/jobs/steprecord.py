"""A job step's record: what the state file keeps of it and what listings show."""

from __future__ import annotations

from typing import Any

import attrs

from ranch.conf import hostlist
from ranch.ctld.jobs.usagerecord import merged
from ranch.statemachine import steptable as st


@attrs.define(eq=False, slots=True)
class Step:
    id: int
    name: str
    user: str
    uid: int
    nodes: tuple[str, ...]
    tasks: tuple[tuple[int, ...], ...]  # task ids per node, in `nodes` order
    cpus: tuple[int, ...]  # CPUs per node (tasks there x cpus per task)
    exclusive: bool  # holds its CPUs against other steps (everything but --overlap)
    start_time: float
    restarts: int
    state: str = st.RUNNING
    awaiting: set[str] = attrs.Factory(set)
    outcome: str = ""
    exit_code: int = 0
    signal: int = 0
    end_time: float | None = None
    host: str = ""  # where rrun runs (its I/O address): scontrol's SrunHost
    usage: dict[str, dict] = attrs.Factory(dict)  # node -> what its tasks used (issue 48)

    @property
    def ntasks(self) -> int:
        return sum(len(t) for t in self.tasks)


def step_json(s: Step) -> dict[str, Any]:
    """The step as the state file keeps it."""
    return {"id": s.id, "name": s.name, "user": s.user, "uid": s.uid, "nodes": list(s.nodes),
            "tasks": [list(t) for t in s.tasks], "cpus": list(s.cpus),
            "exclusive": s.exclusive, "start_time": s.start_time, "restarts": s.restarts,
            "state": s.state, "awaiting": sorted(s.awaiting), "outcome": s.outcome,
            "exit_code": s.exit_code, "signal": s.signal, "end_time": s.end_time,
            "host": s.host, **({"usage": s.usage} if s.usage else {})}


def step_from_json(d: dict[str, Any]) -> Step:
    return Step(int(d["id"]), str(d["name"]), str(d.get("user", "")), int(d.get("uid", -1)),
                tuple(d["nodes"]), tuple(tuple(int(i) for i in t) for t in d["tasks"]),
                tuple(int(c) for c in d["cpus"]), bool(d.get("exclusive", True)),
                float(d["start_time"]), int(d.get("restarts", 0)), str(d["state"]),
                set(d.get("awaiting", ())), str(d.get("outcome", "")),
                int(d.get("exit_code", 0)), int(d.get("signal", 0)), d.get("end_time"),
                str(d.get("host", "")), dict(d.get("usage") or {}))


def step_record(s: Step) -> dict[str, Any]:
    """The step as listings see it (rqueue -s, racct, rcontrol show step)."""
    return {"id": s.id, "name": s.name, "state": s.state, "exit_code": s.exit_code,
            "signal": s.signal, "nodes": hostlist.fold(list(s.nodes)),
            "num_nodes": len(s.nodes), "ntasks": s.ntasks, "cpus": sum(s.cpus),
            "start_time": s.start_time, "end_time": s.end_time, "uid": s.uid, "user": s.user,
            "host": s.host, "usage": merged(s.usage)}
