"""sinfo --json's document: nodes grouped per partition and configuration/state, one entry each.

Built from snapshot records like the rest of ranch.protocol.records, which it reads them with.
"""

from __future__ import annotations

from ranch.protocol.records import (
    is_unusable,
    number,
    partition_doc,
    reason_of,
    reason_user,
    state_array,
    usage_class,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ranch.protocol.records import Fold


def _group_key(part: dict | None, n: dict) -> tuple:
    r = reason_of(n) or {}
    return (
        n["complete"],
        n["compact"],
        n["cpus"],
        n["sockets"],
        n["cores_per_socket"],
        n["threads_per_core"],
        n["real_memory"],
        n["tmp_disk"],
        n["weight"],
        tuple(n.get("features") or ()),
        n.get("gres") or "",
        r.get("text"),
        r.get("user"),
        r.get("time"),
        n.get("port"),
    )


def _span(values: list) -> dict:
    return {"minimum": min(values), "maximum": max(values)}


def _tally(members: list[dict]) -> tuple[dict, dict, list]:
    """One pass over a group: its nodes and cpus objects, and the nodes' free memory."""
    first = members[0]
    alloc = idle = other = 0
    cpu_alloc = cpu_idle = cpu_other = cpu_total = 0
    loads, free = [], []
    for n in members:
        cls = usage_class(n)
        alloc += cls == "A"
        idle += cls == "I"
        other += cls == "O"
        cpus, used = n["cpus"], n["cpus_alloc"]
        cpu_total += cpus
        cpu_alloc += used
        if is_unusable(n):
            cpu_other += cpus - used
        else:
            cpu_idle += cpus - used
        if n.get("cpu_load") is not None:
            loads.append(round(n["cpu_load"] * 100))
        if n.get("free_mem") is not None:
            free.append(n["free_mem"])
    nodes = {
        "allocated": alloc,
        "idle": idle,
        "other": other,
        "total": len(members),
        "hostnames": sorted({n["hostname"] for n in members if n.get("hostname")}),
        "addresses": sorted({n["addr"] for n in members if n.get("addr")}),
        "nodes": [n["name"] for n in members],
    }
    cpus_doc = {
        "allocated": cpu_alloc,
        "idle": cpu_idle,
        "other": cpu_other,
        "total": cpu_total,
        "minimum": first["cpus"],
        "maximum": first["cpus"],
        "load": _span(loads) if loads else {"minimum": 0, "maximum": 0},
    }
    return nodes, cpus_doc, free


def _entry(part: dict | None, members: list[dict], part_doc: dict) -> dict:
    first = members[0]
    nodes, cpus, free = _tally(members)
    reason = reason_of(first) or {}
    features = ",".join(first.get("features") or ())
    entry = {
        "port": first.get("port") or 0,
        "node": {"state": state_array(first)},
        "nodes": nodes,
        "cpus": cpus,
        "sockets": _span([first["sockets"]]),
        "cores": _span([first["cores_per_socket"]]),
        "threads": _span([first["threads_per_core"]]),
        "disk": _span([first["tmp_disk"]]),
        "memory": {
            **_span([first["real_memory"]]),
            "free": {
                "minimum": number(min(free) if free else None),
                "maximum": number(max(free) if free else None),
            },
            "allocation": sum(n.get("alloc_mem") or 0 for n in members),
        },
        "weight": _span([first["weight"]]),
        "features": {"total": features, "active": features},
        "gres": {"total": first.get("gres") or "", "used": first.get("gres_used") or ""},
        "cluster": part_doc["cluster"],
        "comment": "",
        "extra": "",
        "reason": {
            "description": reason.get("text") or "",
            "time": number(int(reason["time"]) if reason.get("time") else None),
            "user": reason_user(reason) if reason else "",
        },
        "reservation": "",
        "partition": part_doc,
    }
    return entry


def sinfo_doc(
    nodes: list[dict],
    parts: list[dict],
    fold: Fold,
    *,
    cluster: str,
    version: str,
    argv: list[str],
    user: str,
) -> dict:
    """The whole document: one sinfo entry per partition and node configuration/state group."""
    index = {p["name"]: i for i, p in enumerate(parts)}
    buckets: list[dict[tuple, list[dict]]] = [{} for _ in parts]
    loose: dict[tuple, list[dict]] = {}
    for n in nodes:
        in_parts = [index[p] for p in n["partitions"] if p in index]
        targets = [buckets[i] for i in in_parts] if n["partitions"] else [loose]
        for bucket in targets:
            k = _group_key(None, n)
            found = bucket.get(k)
            if found is None:
                bucket[k] = [n]
            else:
                found.append(n)
    entries: list[dict] = []
    for part, bucket in zip(parts, buckets, strict=True):
        doc = partition_doc(part, fold, cluster)  # once per partition: it folds every member
        entries.extend(_entry(part, m, doc) for m in bucket.values())
    loose_doc = partition_doc(None, fold, cluster)
    entries.extend(_entry(None, m, loose_doc) for m in loose.values())
    major, _, rest = version.partition(".")
    minor, _, micro = rest.partition(".")
    return {
        "sinfo": entries,
        "meta": {
            "plugin": {"type": "", "name": "", "data_parser": "ranch", "accounting_storage": ""},
            "client": {"source": "", "user": user, "group": ""},
            "command": argv,
            "slurm": {
                "version": {"major": major, "minor": minor, "micro": micro},
                "release": version,
                "cluster": cluster,
            },
        },
        "errors": [],
        "warnings": [],
    }
