"""sacct's usage fields (issue 48) over what rnoded measured (ctld/jobs/usagerecord.py): TotalCPU,
UserCPU, SystemCPU, CPUTime, AveCPU, MinCPU, MaxRSS, AveRSS, MaxVMSize, AveVMSize, the
TRESUsageIn* lists, formatted as sacct 22.05 formats them with jobacct_gather (checked against
a private Slurm with slurmdbd); a line nothing measured prints as sacct's without measuring
(TotalCPU `00:00:00`, the memory fields empty). And Ranch's own GPU fields (GPUUtil, GPUUtilMax,
GPUMem, GPUUsage) on the job line."""

from __future__ import annotations

from ranch.cli.sacct_fields import CPU_FIELDS, GPU_WIDTHS, hms, kibi

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def cpu_text(seconds: float) -> str:
    """sacct's TotalCPU/UserCPU/SystemCPU (print.c _elapsed_time): `MM:SS.mmm` under an hour
    when there are milliseconds, else `[D-]HH:MM:SS`."""
    micro = round(max(0.0, seconds) * 1_000_000)
    secs, usecs = divmod(micro, 1_000_000)
    milli = usecs // 1000
    days, rest = divmod(secs, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, s = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{s:02d}"
    if hours:
        return f"{hours:02d}:{minutes:02d}:{s:02d}"
    if milli:
        return f"{minutes:02d}:{s:02d}.{milli:03d}"
    return f"00:{minutes:02d}:{s:02d}"


def whole_seconds(seconds: float) -> str:
    """AveCPU, MinCPU and a TRES cpu= (secs2time_str: whole seconds, cut)."""
    return hms(int(max(0.0, seconds)))


def _cpu(u: dict) -> float:
    return float(u.get("user_s") or 0) + float(u.get("system_s") or 0)


def _tres(pairs: list[tuple[str, str]]) -> str:
    return ",".join(f"{k}={v}" for k, v in pairs)


def line_value(field: str, u: dict | None, rec: dict, elapsed: float, cpus: int) -> str:
    """A field of a step line (the `.batch` or an rrun step): `u` its figures, None when
    nothing measured it; `elapsed` and `cpus` the step's own (CPUTime is their product)."""
    if field == "CPUTime":
        return hms(int(elapsed) * cpus)
    if field == "CPUTimeRAW":
        return str(int(elapsed) * cpus)
    if field in GPU_WIDTHS:
        return ""
    if u is None:
        return "00:00:00" if field in CPU_FIELDS else ""
    tasks = max(1, int(u.get("tasks") or 1))
    if field == "TotalCPU":
        return cpu_text(_cpu(u))
    if field == "UserCPU":
        return cpu_text(float(u.get("user_s") or 0))
    if field == "SystemCPU":
        return cpu_text(float(u.get("system_s") or 0))
    if field == "AveCPU":
        return whole_seconds(_cpu(u) / tasks)
    if field == "MinCPU":
        return whole_seconds(float(u.get("min_cpu_s") or 0))
    if field in ("MinCPUNode", "TRESUsageInMinNode"):
        return _named(field, u, "min_cpu_node")
    if field in ("MinCPUTask", "TRESUsageInMinTask"):
        return _named(field, u, "min_cpu_task")
    if field == "MaxRSS":
        return kibi(int(u.get("max_rss_kib") or 0), rec)
    if field in ("MaxRSSNode", "MaxRSSTask", "MaxVMSizeNode", "MaxVMSizeTask"):
        what = "max_rss" if "RSS" in field else "max_vm"
        return str(u.get(f"{what}_{'node' if field.endswith('Node') else 'task'}", ""))
    if field == "AveRSS":
        return kibi(int(u.get("rss_kib") or 0) // tasks, rec)
    if field == "MaxVMSize":
        return kibi(int(u.get("max_vm_kib") or 0), rec)
    if field == "AveVMSize":
        return kibi(int(u.get("vm_kib") or 0) // tasks, rec)
    if field == "TRESUsageInTot":
        return _tres([("cpu", whole_seconds(_cpu(u))), ("mem", kibi(int(u.get("rss_kib") or 0),
                      rec)), ("vmem", kibi(int(u.get("vm_kib") or 0), rec))])
    if field == "TRESUsageInAve":
        return _tres([("cpu", whole_seconds(_cpu(u) / tasks)),
                      ("mem", kibi(int(u.get("rss_kib") or 0) // tasks, rec)),
                      ("vmem", kibi(int(u.get("vm_kib") or 0) // tasks, rec))])
    if field == "TRESUsageInMax":
        return _tres([("mem", kibi(int(u.get("max_rss_kib") or 0), rec)),
                      ("vmem", kibi(int(u.get("max_vm_kib") or 0), rec))])
    if field == "TRESUsageInMin":
        return _tres([("cpu", whole_seconds(float(u.get("min_cpu_s") or 0)))])
    if field == "TRESUsageInMaxNode":
        return _tres([("mem", str(u.get("max_rss_node", ""))),
                      ("vmem", str(u.get("max_vm_node", "")))])
    if field == "TRESUsageInMaxTask":
        return _tres([("mem", str(u.get("max_rss_task", 0))),
                      ("vmem", str(u.get("max_vm_task", 0)))])
    return ""


def _named(field: str, u: dict, key: str) -> str:
    value = str(u.get(key, ""))
    return f"cpu={value}" if field.startswith("TRES") else value


def job_cpu(rec: dict) -> tuple[float, float] | None:
    """(user, system) seconds of the job: its batch script's and its steps' (sacct adds up
    the steps for the job line); None when none of them was measured."""
    parts = [rec.get("usage")] + [s.get("usage") for s in rec.get("steps") or ()]
    measured = [u for u in parts if u]
    if not measured:
        return None
    return (sum(float(u.get("user_s") or 0) for u in measured),
            sum(float(u.get("system_s") or 0) for u in measured))


def job_value(field: str, rec: dict, elapsed: float) -> str:
    """A usage field of the job line: CPU summed over its steps, CPUTime, the GPU fields; the
    memory fields empty, as sacct leaves them there."""
    cpus = 0 if rec["state"] == "PENDING" else int(rec.get("cpus") or 0)
    if field == "CPUTime":
        return hms(int(elapsed) * cpus)
    if field == "CPUTimeRAW":
        return str(int(elapsed) * cpus)
    if field in CPU_FIELDS:
        cpu = job_cpu(rec) or (0.0, 0.0)
        return cpu_text({"TotalCPU": cpu[0] + cpu[1], "UserCPU": cpu[0],
                         "SystemCPU": cpu[1]}[field])
    if field in GPU_WIDTHS:
        return gpu_value(field, rec.get("gpu_usage") or [], rec)
    return ""


def gpu_value(field: str, gpus: list[dict[str, Any]], rec: dict) -> str:
    """Ranch's GPU fields: the mean and the highest utilisation over the job's GPUs, the most
    memory any of them had in use, and each one as NODE/INDEX:UTIL%:MEM."""
    sampled = [g for g in gpus if g.get("samples")]
    if not sampled:
        return ""
    if field == "GPUUtil":
        return f"{sum(float(g['util_ave']) for g in sampled) / len(sampled):.1f}%"
    if field == "GPUUtilMax":
        return f"{max(float(g['util_max']) for g in sampled):.1f}%"
    if field == "GPUMem":
        return kibi(max(int(g["mem_max_mib"]) for g in sampled) * 1024, rec)
    return ",".join(f"{g['node']}/{g['index']}:{float(g['util_ave']):.1f}%:"
                    f"{kibi(int(g['mem_max_mib']) * 1024, rec)}" for g in sampled)


# -- racct --json ------------------------------------------------------------------------------


def _seconds(value: float) -> dict:
    micro = round(max(0.0, value) * 1_000_000)
    return {"seconds": micro // 1_000_000, "microseconds": micro % 1_000_000}


def json_times(u: dict | None) -> dict:
    """A step's time.user/system/total as sacct --json gives them (zero when unmeasured)."""
    user = float((u or {}).get("user_s") or 0)
    system = float((u or {}).get("system_s") or 0)
    return {"user": _seconds(user), "system": _seconds(system), "total": _seconds(user + system)}


def json_tres(u: dict | None) -> dict:
    """A step's tres.requested (what its tasks used: sacct's names; cpu in milliseconds, mem
    and vmem in bytes) with the node and task of each max and min."""
    if not u:
        return {"requested": {"max": [], "min": [], "average": [], "total": []}}
    tasks = max(1, int(u.get("tasks") or 1))
    cpu_ms = int(_cpu(u) * 1000)

    def item(kind: str, tid: int, count: int, node: str | None = None,
             task: int | None = None) -> dict:
        out: dict = {"type": kind, "name": None, "id": tid, "count": count}
        if node is not None:
            out.update(task=task, node=node)
        return out

    rss, vm = int(u.get("rss_kib") or 0) * 1024, int(u.get("vm_kib") or 0) * 1024
    return {"requested": {
        "max": [item("mem", 2, int(u.get("max_rss_kib") or 0) * 1024, u.get("max_rss_node"),
                     u.get("max_rss_task")),
                item("vmem", 7, int(u.get("max_vm_kib") or 0) * 1024, u.get("max_vm_node"),
                     u.get("max_vm_task"))],
        "min": [item("cpu", 1, int(float(u.get("min_cpu_s") or 0) * 1000),
                     u.get("min_cpu_node"), u.get("min_cpu_task"))],
        "average": [item("cpu", 1, cpu_ms // tasks), item("mem", 2, rss // tasks),
                    item("vmem", 7, vm // tasks)],
        "total": [item("cpu", 1, cpu_ms), item("mem", 2, rss), item("vmem", 7, vm)],
    }}


def json_gpus(rec: dict) -> list[dict]:
    """Ranch's own `gpus` of a job: each GPU it held, as sampled on its node."""
    return [{"node": g.get("node", ""), "index": g.get("index", 0),
             "utilization": {"average": g.get("util_ave", 0.0), "max": g.get("util_max", 0.0)},
             "memory": {"max_used_mib": g.get("mem_max_mib", 0),
                        "total_mib": g.get("mem_total_mib", 0)},
             "samples": g.get("samples", 0)} for g in rec.get("gpu_usage") or ()]
