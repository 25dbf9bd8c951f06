"""The JSON records rinfo --json, rcontrol show --json and rctld's HTTP API share.

Built from snapshot records (docs/internals.md, "Snapshot records"); pure functions of plain
dicts, so the CLI and the controller import them without importing each other.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Fold = Callable[[list[str]], str]

_PART_STATE = {"UP": "UP", "DOWN": "DOWN", "DRAIN": "DRAIN", "INACTIVE": "INACTIVE"}
_UNUSABLE_BASES = frozenset({"DOWN", "UNKNOWN", "FUTURE"})


def usage_class(node: dict) -> str:
    """sinfo's A/I/O split: "A" allocated or mixed, "I" idle, "O" other (down, drained, failed)."""
    st = node["state"]
    base = st["base"]
    if base in ("ALLOCATED", "MIXED"):
        return "A"
    flags = st["flags"]
    if base in _UNUSABLE_BASES or "DRAIN" in flags or "FAIL" in flags:
        return "O"
    return "I" if base == "IDLE" else "O"


def is_unusable(node: dict) -> bool:
    st = node["state"]
    flags = st["flags"]
    return st["base"] in _UNUSABLE_BASES or "DRAIN" in flags or "FAIL" in flags


def reason_of(node: dict) -> dict | None:
    return node["state"].get("reason")


def reason_user(reason: dict | None) -> str:
    # Reasons the controller sets itself carry no user; Slurm shows its SlurmUser there (root).
    if not reason:
        return "Unknown"
    return reason.get("user") or "root"


def number(value: float | int | None, *, infinite: bool = False) -> dict:
    """Slurm's optional number: {"set", "infinite", "number"}."""
    if infinite:
        return {"set": True, "infinite": True, "number": 0}
    if value is None:
        return {"set": False, "infinite": False, "number": 0}
    return {"set": True, "infinite": False, "number": value}


def state_array(node: dict) -> list[str]:
    """Node state as sinfo --json names it: base then flags, e.g. ["IDLE", "DRAIN"]."""
    st = node["state"]
    names = [st["base"]]
    for f in st["flags"]:
        names.append("NOT_RESPONDING" if f == "NO_RESPOND" else f)
    return names


def partition_doc(part: dict | None, fold: Fold, cluster: str) -> dict:
    if part is None:
        return {"name": "", "cluster": cluster}
    max_time = part.get("max_time")
    default_time = part.get("default_time")
    members = list(part.get("nodes") or ())
    return {
        "name": part["name"],
        "cluster": cluster,
        "nodes": {"configured": fold(members) if members else "", "total": len(members)},
        "partition": {"state": [_PART_STATE.get(part.get("state", "UP"), part.get("state"))]},
        "maximums": {"time": number(max_time, infinite=max_time is None)},
        "defaults": {"time": number(default_time)},
        "flags": ["DEFAULT"] if part.get("default") else [],
        "hidden": bool(part.get("hidden")),
    }


def node_json(n: dict) -> dict:
    reason = reason_of(n) or {}
    load = n.get("cpu_load")
    return {
        "name": n["name"],
        "hostname": n.get("hostname") or "",
        "address": n.get("addr") or "",
        "port": n.get("port") or 0,
        "architecture": n.get("arch") or "",
        "operating_system": n.get("os") or "",
        "state": state_array(n),
        "partitions": list(n.get("partitions") or ()),
        "cpus": n["cpus"],
        "alloc_cpus": n["cpus_alloc"],
        "alloc_idle_cpus": n["cpus"] - n["cpus_alloc"],
        "effective_cpus": n["cpus"],
        "cpu_load": 0 if load is None else round(load * 100),
        "boards": n["boards"],
        "sockets": n["sockets"],
        "cores": n["cores_per_socket"],
        "threads": n["threads_per_core"],
        "real_memory": n["real_memory"],
        "alloc_memory": n.get("alloc_mem") or 0,
        "free_mem": number(n.get("free_mem")),
        "tmp_disk": n["tmp_disk"],
        "weight": n["weight"],
        "features": list(n.get("features") or ()),
        "active_features": list(n.get("features") or ()),
        "gres": n.get("gres") or "",
        "gres_used": n.get("gres_used") or "",
        "version": n.get("version") or "",
        "boot_time": number(_int_time(n.get("boot_time"))),
        "slurmd_start_time": number(_int_time(n.get("slurmd_start_time"))),
        "last_busy": number(_int_time(n.get("last_busy"))),
        "reason": reason.get("text") or "",
        "reason_changed_at": number(_int_time(reason.get("time"))),
        "reason_set_by_user": reason_user(reason) if reason else "",
        "health": n.get("health"),
        "last_power_action": n.get("last_power_action"),  # Ranch (issue 14)
        "last_change": number(_int_time(n.get("last_change"))),  # Ranch (issue 13)
        "approval": next((w for w in ("PENDING", "REJECTED")
                          if w in ((n.get("state") or {}).get("flags") or ())), "APPROVED"),
        "dynamic": bool(n.get("dynamic")),
    }


def _int_time(epoch: float | None) -> int | None:
    return int(epoch) if epoch else None


def partition_json(p: dict, nodes_by_name: dict[str, dict], fold: Fold, cluster: str) -> dict:
    doc = partition_doc(p, fold, cluster)
    members = [nodes_by_name[n] for n in p.get("nodes") or () if n in nodes_by_name]
    doc["cpus"] = {"total": sum(n["cpus"] for n in members)}
    return doc


def show_doc(key: str, items: list, cluster: str, *, version: str, user: str,
             command: list[str]) -> dict:
    """scontrol show --json's document around `items` (nodes or partitions)."""
    return {
        key: items,
        "last_update": {"set": True, "infinite": False, "number": int(time.time())},
        "meta": {
            "plugin": {"type": "", "name": "", "data_parser": "ranch"},
            "client": {"source": "", "user": user, "group": ""},
            "command": command,
            "slurm": {"release": version, "cluster": cluster},
        },
        "errors": [],
        "warnings": [],
    }


# -- jobs (issue 12): rqueue --json, rcontrol show job --json and GET /api/v1/jobs ---------------

# The state a job's exit status reads as in exit_code.status
_EXIT_STATUS = {"COMPLETED": "SUCCESS", "FAILED": "ERROR", "CANCELLED": "SIGNALED",
                "TIMEOUT": "SIGNALED", "OUT_OF_MEMORY": "ERROR", "NODE_FAIL": "ERROR"}


def _job_time(epoch: float | None) -> dict:
    return number(int(epoch) if epoch else 0)


def _signal_name(num: int) -> str:
    import signal as signals  # here: its enum costs a command's start more than the rest

    try:
        return signals.Signals(num).name.removeprefix("SIG")
    except ValueError:
        return ""


def _exit_code(j: dict) -> dict:
    """A job's exit_code object: status from its state, return code and signal."""
    st = j["state"]
    sig = int(j.get("signal") or 0)
    return {
        "status": [_EXIT_STATUS.get(st, "PENDING" if st == "PENDING" else "SUCCESS")],
        "return_code": number(int(j.get("exit_code") or 0)),
        "signal": {"id": number(sig if sig else None), "name": _signal_name(sig) if sig
                   else ""},
    }


def job_json(j: dict) -> dict:
    """One job record (ranch.ctld.jobs.store.Jobs.record) in the field names and number objects
    of Slurm's data_parser, as squeue --json and scontrol show job --json print it."""
    st = j["state"]
    limit = j.get("time_limit")
    return {
        "account": j.get("account") or "",
        "array_job_id": number(j.get("array_job_id") or 0),
        "array_task_id": number(j.get("array_task_id")),
        "batch_flag": True,
        "batch_host": j.get("batch_host") or "",
        "command": j.get("command", ""),
        "comment": j.get("comment") or "",
        "cpus": number(j.get("cpus", 0)),
        "cpus_per_task": number(j.get("cpus_per_task", 1)),
        "current_working_directory": j.get("workdir", ""),
        "dependency": "" if j.get("dependency") in (None, "(null)") else j["dependency"],
        "eligible_time": _job_time(j.get("eligible_time") if "eligible_time" in j
                                   else j.get("submit_time")),
        "end_time": _job_time(j.get("end_time")),
        "excluded_nodes": j.get("exc_nodes") or "",
        "features": j.get("features") or "",
        "exit_code": _exit_code(j),
        "gres_detail": [
            f"gpu:{len(v)}(IDX:{','.join(map(str, v))})"
            for v in (j.get("gpu_indices") or {}).values()
        ],
        "group_id": j.get("gid", 0),
        "job_id": j["job_id"],
        "job_state": [st],
        "mail_type": list(j.get("mail_type") or ()),
        "mail_user": j.get("mail_user") or "",
        "memory_per_node": number(j.get("mem_per_node") or None),
        "name": j.get("name", ""),
        "nice": j.get("nice") or 0,
        "node_count": number(j.get("node_count", 0)),
        "nodes": j.get("nodes") or "",
        "partition": j.get("partition", ""),
        "priority": number(j.get("priority", 0)),
        "qos": j.get("qos") or "",
        "required_nodes": j.get("req_nodes") or "",
        "requeue": bool(j.get("requeue")),
        "restart_cnt": j.get("restarts", 0),
        "shared": "none" if j.get("exclusive") else "",
        "standard_error": j.get("stderr") or j.get("stdout", ""),
        "standard_input": "/dev/null",
        "standard_output": j.get("stdout", ""),
        "start_time": _job_time(j.get("start_time")),
        "state_description": j.get("message", ""),
        "state_reason": j.get("reason") or "None",
        "submit_time": _job_time(j.get("submit_time")),
        "tasks": number(j.get("ntasks", 1)),
        "time_limit": number(limit, infinite=limit is None),
        "tres_per_node": f"gres/gpu:{j['gpus_per_node']}" if j.get("gpus_per_node") else "",
        "wckey": j.get("wckey") or "",
        "user_id": j.get("uid", 0),
        "user_name": j.get("user", ""),
        # Ranch's own (issue 48), once the job ended: what each of its GPUs did
        **({"gpus_used": j["gpu_usage"]} if j.get("gpu_usage") else {}),
    }


def queue_doc(jobs: list[dict], now: float, *, version: str, user: str, command: list[str],
              cluster: str = "") -> dict:
    """squeue --json's document around job records (each turned by job_json)."""
    return {
        "jobs": [job_json(j) for j in jobs],
        "last_backfill": number(None),
        "last_update": number(int(now)),
        "meta": {
            "plugin": {"type": "", "name": "", "data_parser": "ranch"},
            "client": {"source": "", "user": user, "group": ""},
            "command": command,
            "slurm": {"release": version, "cluster": cluster},
        },
        "errors": [],
        "warnings": [],
    }
