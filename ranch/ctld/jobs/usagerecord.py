"""What a job's batch script and steps used (issue 48), as the nodes reported it (protocol/usage.py
Usage, per node) and as racct and rseff read it: one figure set per step over its nodes."""

from __future__ import annotations

from typing import Any

from ranch.protocol import messages as m
from ranch.protocol.codec import converter


def node_usage(usage: m.Usage) -> dict[str, Any]:
    """A node's report as the state file and the job history keep it."""
    return converter.unstructure(usage)


def _figure(u: dict[str, Any], key: str) -> int:
    return int(u.get(key) or 0)


def merged(per_node: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """A step's figures over its nodes: CPU and the per-task sums added up, the largest RSS and
    VMSize and the least CPU with the node and task that had them, each node's GPUs."""
    if not per_node:
        return None
    items = sorted(per_node.items())
    out: dict[str, Any] = {
        key: round(sum(float(u.get(key) or 0) for _, u in items), 3)
        for key in ("user_s", "system_s")
    }
    for key in ("tasks", "rss_kib", "vm_kib", "mem_peak_kib"):
        out[key] = sum(int(u.get(key) or 0) for _, u in items)
    for what in ("max_rss", "max_vm"):
        node, u = max(items, key=lambda kv: _figure(kv[1], f"{what}_kib"))
        out[f"{what}_kib"] = int(u.get(f"{what}_kib") or 0)
        out[f"{what}_node"], out[f"{what}_task"] = node, int(u.get(f"{what}_task") or 0)
    node, u = min(items, key=lambda kv: float(kv[1].get("min_cpu_s") or 0))
    out.update(min_cpu_s=float(u.get("min_cpu_s") or 0), min_cpu_node=node,
               min_cpu_task=int(u.get("min_cpu_task") or 0))
    out["source"] = items[0][1].get("source") or ""
    return out


def gpus_used(per_node: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every GPU the job held, on each node, as that node sampled it."""
    return [{"node": node, **g} for node, u in sorted(per_node.items())
            for g in u.get("gpus") or ()]
