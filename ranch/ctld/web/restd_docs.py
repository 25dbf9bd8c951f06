"""Ranch's records in slurmrestd 22.05's openapi/v0.0.38 shapes: its field names, plain numbers,
null where slurmctld holds NO_VAL, the fields Ranch has no notion of at Slurm's own empty values."""

from __future__ import annotations

import grp
from typing import Any

from ranch.conf import hostlist

PLUGIN = {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"}
SLURM_RELEASE = "22.05.8"  # the release whose API these routes answer as (docs/slurm-compat.md)
NO_VAL = 4294967294  # slurmrestd prints a reservation's unset watts as this


def meta() -> dict[str, Any]:
    major, minor, micro = (int(x) for x in SLURM_RELEASE.split("."))
    return {"plugin": dict(PLUGIN),
            "Slurm": {"version": {"major": major, "micro": micro, "minor": minor},
                      "release": SLURM_RELEASE}}


def document(**fields: Any) -> dict[str, Any]:
    return {"meta": meta(), "errors": [], **fields}


def _int(value: Any) -> int:
    return int(value) if value else 0


def _opt(value: Any) -> int | None:
    return int(value) if value else None


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except (KeyError, OverflowError):
        return str(gid)


def _mem(mib: int) -> str:
    return f"{mib // 1024}G" if mib and mib % 1024 == 0 else f"{mib}M"


def _tres(cpus: int, mem_mib: int, nodes: int | None, gpus: int = 0) -> str:
    words = [f"cpu={cpus}"]
    if mem_mib:
        words.append(f"mem={_mem(mem_mib)}")
    if nodes is not None:
        words.append(f"node={nodes}")
    words.append(f"billing={cpus}")
    if gpus:
        words.append(f"gres/gpu={gpus}")
    return ",".join(words)


# slurmrestd's fields of a job, in its order
_JOB_ORDER = (
    "account", "accrue_time", "admin_comment", "array_job_id", "array_task_id", "array_max_tasks",
    "array_task_string", "association_id", "batch_features", "batch_flag", "batch_host", "flags",
    "burst_buffer", "burst_buffer_state", "cluster", "cluster_features", "command", "comment",
    "container", "contiguous", "core_spec", "thread_spec", "cores_per_socket", "billable_tres",
    "cpus_per_task", "cpu_frequency_minimum", "cpu_frequency_maximum", "cpu_frequency_governor",
    "cpus_per_tres", "deadline", "delay_boot", "dependency", "derived_exit_code", "eligible_time",
    "end_time", "excluded_nodes", "exit_code", "features", "federation_origin",
    "federation_siblings_active", "federation_siblings_viable", "gres_detail", "group_id",
    "group_name", "job_id", "job_state", "last_sched_evaluation", "licenses", "max_cpus",
    "max_nodes", "mcs_label", "memory_per_tres", "name", "nodes", "nice", "tasks_per_core",
    "tasks_per_node", "tasks_per_socket", "tasks_per_board", "cpus", "node_count", "tasks",
    "het_job_id", "het_job_id_set", "het_job_offset", "partition", "prefer", "memory_per_node",
    "memory_per_cpu", "minimum_cpus_per_node", "minimum_tmp_disk_per_node", "preempt_time",
    "pre_sus_time", "priority", "profile", "qos", "reboot", "required_nodes", "requeue",
    "resize_time", "restart_cnt", "resv_name", "shared", "show_flags", "sockets_per_board",
    "sockets_per_node", "start_time", "state_description", "state_reason", "standard_error",
    "standard_input", "standard_output", "submit_time", "suspend_time", "system_comment",
    "time_limit", "time_minimum", "threads_per_core", "tres_bind", "tres_freq", "tres_per_job",
    "tres_per_node", "tres_per_socket", "tres_per_task", "tres_req_str", "tres_alloc_str",
    "user_id", "user_name", "wckey", "current_working_directory",
)

# the fields Ranch has no notion of, at Slurm's own empty values
_NO_NOTION: dict[str, Any] = {
    "admin_comment": "", "array_max_tasks": 0, "array_task_string": "", "association_id": 0,
    "batch_features": "", "burst_buffer": "", "burst_buffer_state": "", "cluster_features": "",
    "container": "", "contiguous": False, "core_spec": None, "thread_spec": None,
    "cores_per_socket": None, "cpu_frequency_minimum": None, "cpu_frequency_maximum": None,
    "cpu_frequency_governor": None, "cpus_per_tres": "", "deadline": 0, "delay_boot": 0,
    "derived_exit_code": 0, "federation_origin": "", "federation_siblings_active": "",
    "federation_siblings_viable": "", "licenses": "", "max_cpus": 0, "mcs_label": "",
    "memory_per_tres": "", "tasks_per_core": None, "tasks_per_socket": None, "tasks_per_board": 0,
    "het_job_id": 0, "het_job_id_set": "", "het_job_offset": 0, "prefer": "",
    "minimum_tmp_disk_per_node": 0, "preempt_time": 0, "pre_sus_time": 0, "profile": None,
    "reboot": False, "resize_time": 0, "resv_name": "", "sockets_per_board": 0,
    "sockets_per_node": None, "suspend_time": 0, "system_comment": "", "time_minimum": 0,
    "threads_per_core": None, "tres_bind": "", "tres_freq": "", "tres_per_job": "",
    "tres_per_socket": "", "tres_per_task": "",
}
_JOB_SHAPE = {**dict.fromkeys(_JOB_ORDER), **_NO_NOTION}  # job() fills in the rest


def job(j: dict[str, Any], cluster: str, by_name: dict[str, dict],
        least_memory: int = 0) -> dict[str, Any]:
    """One job record (ctld/jobs/joblisting.py) as GET /slurm/v0.0.38/jobs lists it;
    `least_memory`: the smallest node's RealMemory (worked out once per listing)."""
    state = j["state"]
    limit = j.get("time_limit")
    array_job = int(j.get("array_job_id") or 0)
    doc = dict(_JOB_SHAPE)  # updated in place: slurmrestd's order stays
    doc.update(_sizes(j, least_memory))
    doc.update({
        "account": j.get("account") or "", "accrue_time": _int(j.get("accrue_time")),
        "array_job_id": array_job,
        "array_task_id": j.get("array_task_id") if array_job else None,
        "batch_flag": bool(j.get("batch_flag", 1)), "batch_host": j.get("batch_host") or "",
        "flags": _flags(j), "cluster": cluster,
        "command": "" if j.get("command") == "(wrap)" else j.get("command") or "",
        "comment": j.get("comment") or "",
        "dependency": "" if j.get("dependency") in (None, "(null)") else j["dependency"],
        "eligible_time": _int(j.get("eligible_time")), "end_time": _end(j, limit),
        "exit_code": (int(j.get("exit_code") or 0) << 8) | int(j.get("signal") or 0),
        "group_id": j.get("gid", 0), "group_name": _group(int(j.get("gid") or 0)),
        "job_id": j["job_id"], "job_state": state,
        "last_sched_evaluation": _int(j.get("submit_time")), "name": j.get("name", ""),
        "nice": int(j["nice"]) if j.get("nice") else None,
        "partition": j.get("partition", ""), "priority": int(j.get("priority") or 0),
        "qos": j.get("qos") or "", "requeue": bool(j.get("requeue")),
        "restart_cnt": int(j.get("restarts") or 0),
        "show_flags": ["SHOW_ALL", "SHOW_DETAIL", "SHOW_LOCAL"],
        "start_time": _int(j.get("start_time")),
        "state_description": j.get("message") or "", "state_reason": j.get("reason") or "None",
        "standard_error": j.get("stderr") or "",
        "standard_input": j.get("stdin") or "/dev/null",
        "standard_output": j.get("stdout") or "", "submit_time": _int(j.get("submit_time")),
        "time_limit": None if limit is None else int(limit),
        "user_id": j.get("uid", 0), "user_name": j.get("user", ""), "wckey": j.get("wckey") or "",
        "current_working_directory": j.get("workdir", ""),
    })
    if j.get("nodes"):  # an allocation was made: slurmrestd shows it after the job ends too
        doc = _with_resources(doc, j, by_name, _asked_mem(j))
    return doc


def _asked_mem(j: dict[str, Any]) -> int:
    """The memory the job asked for per node (MiB), 0 when it asked for none."""
    return int(j.get("mem_per_node") or 0) or int(j.get("mem_per_cpu") or 0) * int(
        j.get("cpus") or 0)


def _sizes(j: dict[str, Any], least_memory: int) -> dict[str, Any]:
    """What the job asked for and holds: nodes, CPUs, tasks, memory, GPUs, their TRES."""
    nodes = int(j.get("node_count") or 0)
    cpus = int(j.get("cpus") or 0)
    mem_node = int(j.get("mem_per_node") or 0)
    mem_cpu = int(j.get("mem_per_cpu") or 0)
    # sbatch's default memory is the whole node's (DefMemPerNode unset): what tres shows
    asked_mem = _asked_mem(j)
    shown_mem = asked_mem or least_memory
    gpus = int(j.get("gpus_per_node") or 0) * nodes
    started = j["state"] not in ("PENDING",) and bool(j.get("start_time"))
    return {
        "billable_tres": float(cpus) if started else None,
        "cpus_per_task": j["cpus_per_task"] if int(j.get("cpus_per_task") or 1) > 1 else None,
        "excluded_nodes": j.get("exc_nodes") or "", "features": j.get("features") or "",
        "gres_detail": [f"gpu:{len(v)}(IDX:{','.join(map(str, v))})"
                        for v in (j.get("gpu_indices") or {}).values()],
        "max_nodes": int(j.get("max_nodes") or 0), "nodes": j.get("nodes") or "",
        "tasks_per_node": int(j.get("ntasks_per_node") or 0), "cpus": cpus,
        "node_count": nodes, "tasks": int(j.get("ntasks") or 1),
        "memory_per_node": mem_node or None, "memory_per_cpu": mem_cpu or None,
        "minimum_cpus_per_node": int(j.get("cpus_per_task") or 1),
        "required_nodes": j.get("req_nodes") or "",
        "shared": "none" if j.get("exclusive") else None,
        "tres_per_node": f"gres:gpu:{j['gpus_per_node']}" if j.get("gpus_per_node") else "",
        "tres_req_str": _tres(cpus, shown_mem, nodes or 1, gpus),
        "tres_alloc_str": _tres(cpus, asked_mem * nodes, nodes, gpus) if started else "",
    }


def _flags(j: dict[str, Any]) -> list[str]:
    """slurmctld's job flags as slurmrestd shows them: a job that ran says so while it runs;
    once it ended its TRES strings are computed for good."""
    if not j.get("start_time"):
        return []
    return ["JOB_WAS_RUNNING"] if j["state"] in ("RUNNING", "SUSPENDED", "COMPLETING") \
        else ["TRES_STR_CALC"]


YEAR = 365 * 86400  # slurmctld's end time of a running job without a limit: a year on


def _end(j: dict[str, Any], limit: int | None) -> int:
    """The end, or for a running job the end its limit allows, as slurmctld keeps it."""
    if j["state"] in ("RUNNING", "SUSPENDED", "CONFIGURING") and j.get("start_time"):
        return int(j["start_time"]) + (YEAR if limit is None else int(limit) * 60)
    return _int(j.get("end_time"))


def _with_resources(doc: dict[str, Any], j: dict[str, Any], by_name: dict[str, dict],
                    mem: int) -> dict[str, Any]:
    """job_resources: each node's CPUs of the job. Ranch counts CPUs, not which cores: the
    sockets map fills cores in order (docs/slurm-compat.md)."""
    names = hostlist.expand(j["nodes"])
    counts = list(j.get("node_cpus") or ()) or [int(j.get("cpus") or 0) // len(names)] * len(
        names)
    allocated = []
    for name, used in zip(names, counts, strict=False):
        n = by_name.get(name) or {}
        per_core = int(n.get("threads_per_core") or 1)
        cores_per_socket = int(n.get("cores_per_socket") or 1)
        sockets: dict[str, dict[str, dict[str, str]]] = {}
        for core in range(-(-used // per_core)):
            sock, idx = divmod(core, cores_per_socket)
            sockets.setdefault(str(sock), {"cores": {}})["cores"][str(idx)] = "allocated"
        allocated.append({"sockets": sockets, "nodename": name, "cpus_used": 0,
                          "memory_used": 0, "memory_allocated": mem})
    doc["job_resources"] = {"nodes": j["nodes"], "allocated_cpus": int(j.get("cpus") or 0),
                            "allocated_hosts": len(names), "allocated_nodes": allocated}
    return doc


def node(n: dict[str, Any]) -> dict[str, Any]:
    """One node record of the snapshot (ctld/nodes/node.py) as GET /slurm/v0.0.38/nodes has it."""
    st = n["state"]
    reason = st.get("reason") or {}
    load = n.get("cpu_load")
    features = ",".join(n.get("features") or ())
    cpus, used = n["cpus"], n["cpus_alloc"]
    mem = n["real_memory"]
    flags = ["NOT_RESPONDING" if f == "NO_RESPOND" else f for f in st.get("flags") or ()]
    return {
        "architecture": n.get("arch") or "", "burstbuffer_network_address": "",
        "boards": n["boards"], "boot_time": _int(n.get("boot_time")), "comment": "",
        "cores": n["cores_per_socket"], "cpu_binding": 0,
        "cpu_load": 0 if load is None else round(load * 100), "extra": "",
        "free_memory": _opt(n.get("free_mem")) or 0, "cpus": cpus,
        "last_busy": _int(n.get("last_busy")), "features": features,
        "active_features": features, "gres": n.get("gres") or "",
        "gres_drained": "N/A", "gres_used": n.get("gres_used") or "", "mcs_label": "",
        "name": n["name"], "next_state_after_reboot": "invalid",
        "address": n.get("addr") or "", "hostname": n.get("hostname") or "",
        "state": st["base"].lower(), "state_flags": flags,
        "next_state_after_reboot_flags": [], "operating_system": n.get("os") or "",
        "owner": None, "partitions": list(n.get("partitions") or ()),
        "port": n.get("port") or 0, "real_memory": mem,
        "reason": reason.get("text") or "",
        "reason_changed_at": _int(reason.get("time")),
        "reason_set_by_user": reason.get("user") or None,
        "slurmd_start_time": _int(n.get("slurmd_start_time")),
        "sockets": n["sockets"], "threads": n["threads_per_core"],
        "temporary_disk": n.get("tmp_disk") or 0, "weight": n["weight"],
        "tres": _tres(cpus, mem, None, _gpus(n.get("gres") or "")),
        "slurmd_version": n.get("version") or "", "alloc_memory": n.get("alloc_mem") or 0,
        "alloc_cpus": used, "idle_cpus": cpus - used,
        "tres_used": _used(used, n.get("alloc_mem") or 0) if used else None,
        "tres_weighted": float(used),
    }


def _used(cpus: int, mem_mib: int) -> str:
    return f"cpu={cpus}" + (f",mem={_mem(mem_mib)}" if mem_mib else "")


def _gpus(gres: str) -> int:
    total = 0
    for word in gres.split(","):
        parts = word.split(":")
        if parts[0] == "gpu" and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def partition(p: dict[str, Any], by_name: dict[str, dict]) -> dict[str, Any]:
    """A partition record (NodeRegistry.partition_records) as GET /slurm/v0.0.38/partitions
    has it."""
    members = [by_name[n] for n in p.get("nodes") or () if n in by_name]
    cpus = sum(n["cpus"] for n in members)
    mem = sum(n["real_memory"] for n in members)
    max_time, default_time = p.get("max_time"), p.get("default_time")
    flags = (["default"] if p.get("default") else []) + (["hidden"] if p.get("hidden") else [])
    return {
        "flags": flags, "preemption_mode": ["disabled"], "allowed_allocation_nodes": "",
        "allowed_accounts": "", "allowed_groups": "", "allowed_qos": "", "alternative": "",
        "billing_weights": "", "default_memory_per_cpu": None, "default_memory_per_node": None,
        "default_time_limit": None if default_time is None else int(default_time),
        "denied_accounts": "", "denied_qos": "", "preemption_grace_time": 0,
        "maximum_cpus_per_node": -1, "maximum_memory_per_cpu": None,
        "maximum_memory_per_node": None, "maximum_nodes_per_job": -1,
        "max_time_limit": -1 if max_time is None else int(max_time),
        "min nodes per job": 0, "name": p["name"],
        "nodes": hostlist.fold(list(p.get("nodes") or ())) if p.get("nodes") else "",
        "over_time_limit": None, "priority_job_factor": 1, "priority_tier": 1, "qos": "",
        "state": p.get("state") or "UP", "total_cpus": cpus, "total_nodes": len(members),
        "tres": _tres(cpus, mem, len(members)),
    }


def reservation(r: dict[str, Any], by_name: dict[str, dict]) -> dict[str, Any]:
    """A reservation (ctld/nodes/reservations.py show) as GET /slurm/v0.0.38/reservations."""
    names = list(r.get("node_names") or ()) or (
        hostlist.expand(r["nodes"]) if r.get("nodes") else [])
    cores = sum(by_name[n]["cpus"] for n in names if n in by_name)
    flags = [f.upper() for f in r.get("flags") or ()]
    if names and "SPEC_NODES" not in flags:
        flags.append("SPEC_NODES")  # nodes named by the admin, as scontrol's Nodes= does
    users = r.get("users") or ""
    return {
        "flags": flags, "accounts": "", "burst_buffer": "", "core_count": cores,
        "core_spec_cnt": 0, "end_time": _int(r.get("end_time")), "features": "",
        "groups": "", "licenses": "", "max_start_delay": 0, "name": r["name"],
        "node_count": len(names), "node_list": hostlist.fold(names) if names else "",
        "partition": r.get("partition") or "", "start_time": _int(r.get("start_time")),
        "watts": NO_VAL, "tres": f"cpu={cores}",
        "users": users if isinstance(users, str) else ",".join(users),
    }


_DIAG_ZERO = ("server_thread_count", "agent_queue_size", "agent_count", "agent_thread_count",
              "dbd_agent_queue_size", "gettimeofday_latency", "schedule_cycle_max",
              "schedule_cycle_last", "schedule_cycle_total", "schedule_cycle_mean",
              "schedule_cycle_mean_depth", "schedule_cycle_per_minute",
              "schedule_queue_length")
_BF_ZERO = ("bf_backfilled_jobs", "bf_last_backfilled_jobs", "bf_backfilled_het_jobs",
            "bf_cycle_counter", "bf_cycle_mean", "bf_depth_mean", "bf_depth_mean_try",
            "bf_cycle_last", "bf_cycle_max", "bf_queue_len", "bf_queue_len_mean",
            "bf_table_size", "bf_table_size_mean", "bf_when_last_cycle")


def diag(records: list[dict[str, Any]], generated_at: float, partitions: int) -> dict[str, Any]:
    """sdiag's statistics from the jobs rctld holds (Slurm counts since its last reset; Ranch
    keeps no such counters, nor the RPCs': those read 0, docs/slurm-compat.md); the scheduler's
    and backfill's are 0 here and laid over by the caller (ctld/jobs/schedstats.py)."""
    states = [r["state"] for r in records]
    return {
        "parts_packed": partitions, "req_time": int(generated_at), "req_time_start": 0,
        **{k: 0 for k in _DIAG_ZERO},
        "jobs_submitted": len(records),
        "jobs_started": sum(1 for r in records if r.get("start_time")),
        "jobs_completed": states.count("COMPLETED"),
        "jobs_canceled": states.count("CANCELLED"),
        "jobs_failed": sum(states.count(s) for s in ("FAILED", "NODE_FAIL", "BOOT_FAIL",
                                                      "OUT_OF_MEMORY")),
        "jobs_pending": states.count("PENDING"), "jobs_running": states.count("RUNNING"),
        "job_states_ts": int(generated_at), **{k: 0 for k in _BF_ZERO}, "bf_active": False,
        "rpcs_by_message_type": [], "rpcs_by_user": [],
    }
