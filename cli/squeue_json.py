"""`rqueue --json`: squeue's JSON document ({"jobs": [...], "meta": ..., "errors", "warnings"})
with each job in the field names and number objects of Slurm's data_parser."""

from __future__ import annotations

import getpass
import signal as signals

from cli.rinfo import VERSION
from cli.sinfo_json import number

# The state a job's exit status reads as in exit_code.status
_STATUS = {"COMPLETED": "SUCCESS", "FAILED": "ERROR", "CANCELLED": "SIGNALED",
           "TIMEOUT": "SIGNALED", "OUT_OF_MEMORY": "ERROR", "NODE_FAIL": "ERROR"}


def _time(epoch: float | None) -> dict:
    return number(int(epoch) if epoch else 0)


def _signal_name(num: int) -> str:
    try:
        return signals.Signals(num).name.removeprefix("SIG")
    except ValueError:
        return ""


def job_doc(j: dict) -> dict:
    st = j["state"]
    limit = j.get("time_limit")
    sig = int(j.get("signal") or 0)
    array = j.get("array_job_id") or 0
    return {
        "account": "",
        "array_job_id": number(array),
        "array_task_id": number(j.get("array_task_id")),
        "batch_flag": True,
        "batch_host": j.get("batch_host") or "",
        "command": j.get("command", ""),
        "cpus": number(j.get("cpus", 0)),
        "cpus_per_task": number(j.get("cpus_per_task", 1)),
        "current_working_directory": j.get("workdir", ""),
        "eligible_time": _time(j.get("eligible_time") or j.get("submit_time")),
        "end_time": _time(j.get("end_time")),
        "excluded_nodes": j.get("exc_nodes") or "",
        "exit_code": {
            "status": [_STATUS.get(st, "PENDING" if st == "PENDING" else "SUCCESS")],
            "return_code": number(int(j.get("exit_code") or 0)),
            "signal": {"id": number(sig if sig else None), "name": _signal_name(sig) if sig
                       else ""},
        },
        "gres_detail": [
            f"gpu:{len(v)}(IDX:{','.join(map(str, v))})"
            for v in (j.get("gpu_indices") or {}).values()
        ],
        "group_id": j.get("gid", 0),
        "job_id": j["job_id"],
        "job_state": [st],
        "memory_per_node": number(j.get("mem_per_node") or None),
        "name": j.get("name", ""),
        "node_count": number(j.get("node_count", 0)),
        "nodes": j.get("nodes") or "",
        "partition": j.get("partition", ""),
        "priority": number(j.get("priority", 0)),
        "required_nodes": j.get("req_nodes") or "",
        "requeue": bool(j.get("requeue")),
        "restart_cnt": j.get("restarts", 0),
        "shared": "none" if j.get("exclusive") else "",
        "standard_error": j.get("stderr") or j.get("stdout", ""),
        "standard_input": "/dev/null",
        "standard_output": j.get("stdout", ""),
        "start_time": _time(j.get("start_time")),
        "state_description": j.get("message", ""),
        "state_reason": j.get("reason") or "None",
        "submit_time": _time(j.get("submit_time")),
        "tasks": number(j.get("ntasks", 1)),
        "time_limit": number(limit, infinite=limit is None),
        "tres_per_node": f"gres/gpu:{j['gpus_per_node']}" if j.get("gpus_per_node") else "",
        "user_id": j.get("uid", 0),
        "user_name": j.get("user", ""),
    }


def document(jobs: list[dict], now: float, command: list[str]) -> str:
    import orjson

    doc = {
        "jobs": [job_doc(j) for j in jobs],
        "last_backfill": number(None),
        "last_update": number(int(now)),
        "meta": {
            "plugin": {"type": "", "name": "", "data_parser": "ranch"},
            "client": {"source": "", "user": getpass.getuser(), "group": ""},
            "command": command,
            "slurm": {"release": VERSION, "cluster": ""},
        },
        "errors": [],
        "warnings": [],
    }
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
