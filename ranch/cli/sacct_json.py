"""`racct --json`: sacct's JSON document ({"jobs": [...], "meta", "errors", "warnings"}) with
each job in the field names of Slurm's accounting data_parser (state.current, exit_code with
status/return_code/signal, time.{submission,eligible,start,end,elapsed,limit}, steps)."""

from __future__ import annotations

import getpass
import signal as signals

from ranch.cli.rinfo import VERSION
from ranch.cli.sacct_fields import elapsed, has_batch_step, step_state
from ranch.cli.sacct_usage import json_gpus, json_times, json_tres
from ranch.protocol.records import number


def _exit(code: int, sig: int) -> dict:
    status = "SIGNALED" if sig else ("FAILED" if code else "SUCCESS")
    out: dict = {"status": status, "return_code": code}
    if sig:
        try:
            name = signals.Signals(sig).name.removeprefix("SIG")
        except ValueError:
            name = ""
        out["signal"] = {"signal_id": sig, "name": name}
    return out


def job_doc(rec: dict, now: float, steps: bool) -> dict:
    limit = rec.get("time_limit")
    doc = {
        "account": rec.get("account") or "",
        "allocation_nodes": rec.get("node_count") or 0,
        "array": {"job_id": rec.get("array_job_id") or 0,
                  "task_id": number(rec.get("array_task_id"))},
        "cluster": rec.get("cluster") or "",
        "comment": {"job": rec.get("comment") or ""},
        "constraints": rec.get("features") or "",
        "derived_exit_code": _exit(rec.get("exit_code") or 0, 0),
        "exit_code": _exit(rec.get("exit_code") or 0, 0 if rec["state"] in (
            "CANCELLED", "TIMEOUT") else rec.get("signal") or 0),  # as the table's job line
        "job_id": rec["job_id"],
        "name": rec.get("name") or "",
        "nodes": rec.get("nodes") or "None assigned",
        "partition": rec.get("partition") or "",
        "priority": number(rec.get("priority")),
        "qos": rec.get("qos") or "",
        "required": {"CPUs": (rec.get("ntasks") or 1) * (rec.get("cpus_per_task") or 1),
                     "memory_per_node": number(rec.get("mem_per_node") or None),
                     "memory_per_cpu": number(rec.get("mem_per_cpu") or None)},
        "restart_cnt": rec.get("restarts") or 0,
        "state": {"current": [rec["state"]], "reason": rec.get("reason") or "None"},
        "time": {
            "elapsed": int(elapsed(rec, now)),
            "eligible": int(rec.get("eligible_time") or 0),
            "end": int(rec.get("end_time") or 0),
            "start": int(rec.get("start_time") or 0),
            "submission": int(rec.get("submit_time") or 0),
            "suspended": 0,
            "limit": number(limit, infinite=limit is None),
        },
        "user": rec.get("user") or "",
        "wckey": {"wckey": rec.get("wckey") or "", "flags": []},
        "working_directory": rec.get("workdir") or "",
        "steps": [],
        "gpus": json_gpus(rec),  # Ranch's own (issue 48): what the job's GPUs did
    }
    only = rec.get("_only_steps")  # -j 12.1 (cli/sacct_steps.py)
    if steps and has_batch_step(rec) and (only is None or "batch" in only):
        state = step_state(rec)
        sig = rec.get("signal") or (15 if rec["state"] in ("TIMEOUT", "CANCELLED") else 0)
        doc["steps"].append({
            "step": {"id": f"{rec['job_id']}.batch", "name": "batch"},
            "state": state,
            "exit_code": _exit(rec.get("exit_code") or 0, sig),
            "nodes": {"count": 1, "range": rec.get("batch_host") or ""},
            "time": {"elapsed": int(elapsed(rec, now)),
                     "start": int(rec.get("start_time") or 0),
                     "end": int(rec.get("end_time") or 0), **json_times(rec.get("usage"))},
            "tres": json_tres(rec.get("usage")),
        })
    if steps and rec.get("steps"):
        from ranch.cli.sacct_steps import step_doc

        doc["steps"] += [step_doc(rec, s, now) for s in rec["steps"]
                         if only is None or str(s["id"]) in only]
    return doc


def document(records: list[dict], now: float, command: list[str], steps: bool = True) -> str:
    import orjson

    doc = {
        "jobs": [job_doc(r, now, steps) for r in records],
        "meta": {
            "plugin": {"type": "", "name": "", "data_parser": "ranch"},
            "client": {"source": "", "user": getpass.getuser(), "group": ""},
            "command": command,
            "slurm": {"release": VERSION, "cluster": records[0].get("cluster", "")
                      if records else ""},
        },
        "errors": [],
        "warnings": [],
    }
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
