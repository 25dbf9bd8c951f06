"""sacct's fields over racct's job records (ctld/jobs/acct.py `record_of`): names, widths and
justification as sacct 22.05 prints them, the job line and its `.batch` step line, and the
table, `-p`/`-P` and `%N`-width forms."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Getter = Callable[[dict, float], str]

# Every field sacct 22.05 knows, with its width (negative: left-justified), read off sacct
# itself (`sacct -e`, and each field's header line). Ranch fills the ones it has a value for;
# the others print empty, as sacct prints a field nothing measured.
WIDTHS: dict[str, int] = {
    "Account": 10, "AdminComment": 15, "AllocCPUS": 10, "AllocNodes": 10, "AllocTRES": 10,
    "AssocID": 7, "AveCPU": 10, "AveCPUFreq": 10, "AveDiskRead": 14, "AveDiskWrite": 14,
    "AvePages": 10, "AveRSS": 10, "AveVMSize": 10, "BlockID": 16, "Cluster": 10, "Comment": 14,
    "Constraints": 19, "ConsumedEnergy": 14, "ConsumedEnergyRaw": 17, "Container": 19,
    "CPUTime": 10, "CPUTimeRAW": 10, "DBIndex": -10, "DerivedExitCode": 15, "Elapsed": 10,
    "ElapsedRaw": 10, "Eligible": 19, "End": 19, "ExitCode": 8, "Flags": 19, "GID": 6,
    "Group": 9, "JobID": -12, "JobIDRaw": -12, "JobName": 10, "Layout": 9, "MaxDiskRead": 12,
    "MaxDiskReadNode": 15, "MaxDiskReadTask": 15, "MaxDiskWrite": 12, "MaxDiskWriteNode": 16,
    "MaxDiskWriteTask": 16, "MaxPages": 8, "MaxPagesNode": 12, "MaxPagesTask": 14, "MaxRSS": 10,
    "MaxRSSNode": 10, "MaxRSSTask": 10, "MaxVMSize": 10, "MaxVMSizeNode": 14,
    "MaxVMSizeTask": 14, "McsLabel": 12, "MinCPU": 10, "MinCPUNode": 10, "MinCPUTask": 10,
    "NCPUS": 10, "NNodes": 8, "NodeList": 15, "NTasks": 8, "Partition": 10, "Priority": 10,
    "QOS": 10, "QOSRAW": 6, "Reason": 22, "ReqCPUFreq": 10, "ReqCPUFreqGov": 13,
    "ReqCPUFreqMax": 13, "ReqCPUFreqMin": 13, "ReqCPUS": 8, "ReqMem": 10, "ReqNodes": 8,
    "ReqTRES": 10, "Reservation": 20, "ReservationId": 8, "Reserved": 10, "ResvCPU": 10,
    "ResvCPURAW": 10, "Start": 19, "State": 10, "Submit": 19, "SubmitLine": 20, "Suspended": 10,
    "SystemComment": 15, "SystemCPU": 10, "Timelimit": 10, "TimelimitRaw": 10, "TotalCPU": 10,
    "TRESUsageInAve": 14, "TRESUsageInMax": 14, "TRESUsageInMaxNode": 18,
    "TRESUsageInMaxTask": 18, "TRESUsageInMin": 14, "TRESUsageInMinNode": 18,
    "TRESUsageInMinTask": 18, "TRESUsageInTot": 14, "TRESUsageOutAve": 15, "TRESUsageOutMax": 15,
    "TRESUsageOutMaxNode": 19, "TRESUsageOutMaxTask": 19, "TRESUsageOutMin": 15,
    "TRESUsageOutMinNode": 19, "TRESUsageOutMinTask": 19, "TRESUsageOutTot": 15, "UID": 6,
    "User": 9, "UserCPU": 10, "WCKey": 10, "WCKeyID": 10, "WorkDir": 20,
}
BY_LOWER = {name.lower(): name for name in WIDTHS}
# sacct's abbreviations in -l (`jodidraw` is sacct's own spelling in its -l list)
ALIASES = {"jodidraw": "JobIDRaw", "tresusageinmaxn": "TRESUsageInMaxNode",
           "tresusageinmaxt": "TRESUsageInMaxTask", "tresusageinminn": "TRESUsageInMinNode",
           "tresusageinmint": "TRESUsageInMinTask", "tresusageoutmaxn": "TRESUsageOutMaxNode",
           "tresusageoutmaxt": "TRESUsageOutMaxTask"}

DEFAULT_FORMAT = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
BRIEF_FORMAT = "JobID,State,ExitCode"
LONG_FORMAT = (
    "jobid,jodidraw,jobname,partition,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,"
    "maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,"
    "mincpunode,mincputask,avecpu,ntasks,alloccpus,elapsed,state,exitcode,avecpufreq,"
    "reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,reqmem,consumedenergy,maxdiskread,"
    "maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,"
    "maxdiskwritetask,avediskwrite,reqtres,alloctres,tresusageinave,tresusageinmax,"
    "tresusageinmaxn,tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,"
    "tresusageintot,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,tresusageoutave,"
    "tresusageouttot")


# What rnoded measures (issue 48: cli/sacct_usage.py formats them), and Ranch-only fields
# (docs/slurm-compat.md) with their widths: sacct has no GPU use
GPU_WIDTHS = {"GPUUtil": 10, "GPUUtilMax": 10, "GPUMem": 10, "GPUUsage": 24}
CPU_FIELDS = ("TotalCPU", "UserCPU", "SystemCPU")
USAGE_FIELDS = frozenset({
    *CPU_FIELDS, "CPUTime", "CPUTimeRAW", "AveCPU", "MinCPU", "MinCPUNode", "MinCPUTask",
    "MaxRSS", "MaxRSSNode", "MaxRSSTask", "AveRSS", "MaxVMSize", "MaxVMSizeNode",
    "MaxVMSizeTask", "AveVMSize", "TRESUsageInTot", "TRESUsageInMax", "TRESUsageInAve",
    "TRESUsageInMin", "TRESUsageInMaxNode", "TRESUsageInMaxTask", "TRESUsageInMinNode",
    "TRESUsageInMinTask", *GPU_WIDTHS})


# Ranch's own fields (issue 48: what the job's GPUs did), by their exact name only, and not in
# ALL or -e: a script reading sacct's lists sees sacct's
RANCH_ONLY = {name.lower(): name for name in GPU_WIDTHS}


class FormatError(ValueError):
    pass


def parse_format(text: str) -> list[tuple[str, int]]:
    """-o/--format: "jobid,jobname%30,state%-8" -> [(field, width)] (sacct's names, any case;
    a width after `%`, negative: left-justified)."""
    out = []
    for word in text.split(","):
        word = word.strip()
        if not word:
            continue
        name, _, width_text = word.partition("%")
        lower = name.lower()
        if lower and "all".startswith(lower):  # sacct: any start of ALL is every field
            found = list(WIDTHS)
        else:  # else the first field (sacct's order) the word starts, in any case
            field = ALIASES.get(lower) or BY_LOWER.get(lower) or next(
                (f for f in WIDTHS if f.lower().startswith(lower)), None) or RANCH_ONLY.get(
                lower)
            if field is None:
                raise FormatError(f"Invalid field requested: \"{name}\"")
            found = [field]
        for field in found:
            if width_text:
                try:
                    width = int(width_text)
                except ValueError:
                    raise FormatError(f"Invalid field width in \"{word}\"") from None
            else:
                width = WIDTHS.get(field) or GPU_WIDTHS[field]
            out.append((field, width))
    return out


# -- values ----------------------------------------------------------------------------------


def stamp(epoch: float | None) -> str:
    from ranch.conf.timefmt import slurm_timestamp  # only when a time is shown

    return slurm_timestamp(epoch or 0)


def hms(seconds: float | None) -> str:
    """sacct's elapsed form: [D-]HH:MM:SS."""
    s = max(0, int(seconds or 0))
    days, s = divmod(s, 86400)
    text = f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days}-{text}" if days else text


def elapsed(rec: dict, now: float) -> float:
    start = rec.get("start_time")
    if not start or rec["state"] == "PENDING":
        return 0.0
    return (rec.get("end_time") or now) - start


def mem_text(mib: int) -> str:
    if not mib:
        return "0"
    for unit, size in (("T", 1 << 20), ("G", 1 << 10)):
        if mib % size == 0:
            return f"{mib // size}{unit}"
    return f"{mib}M"


def kibi(kib: int, rec: dict) -> str:
    """A figure measured in KiB, in --units' unit when racct was given one (sacct's
    convert_num_unit: two decimals where it does not divide)."""
    unit = rec.get("_units") or "K"
    div = 1024 ** "KMGTP".index(unit)
    if kib % div == 0:
        return f"{kib // div}{unit}"
    return f"{kib / div:.2f}{unit}"


def req_mem(rec: dict) -> str:
    per_node = rec.get("mem_per_node") or 0
    if per_node:
        return mem_text(per_node * (rec.get("node_count") or 1))
    per_cpu = rec.get("mem_per_cpu") or 0
    return mem_text(per_cpu * (rec.get("cpus") or 1)) if per_cpu else "0"


def exit_code(rec: dict) -> str:
    """The job line's ExitCode. A job ended by scancel or its time limit shows `0:0` there, as
    sacct shows it (checked against Slurm 22.05's completion record); the signal that ended
    its script is on the `.batch` step's line."""
    if rec["state"] in ("CANCELLED", "TIMEOUT"):
        return f"{rec.get('exit_code') or 0}:0"
    return f"{rec.get('exit_code') or 0}:{rec.get('signal') or 0}"


def step_exit_code(rec: dict) -> str:
    if rec["state"] in ("CANCELLED", "TIMEOUT"):
        return f"{rec.get('exit_code') or 0}:{rec.get('signal') or 15}"
    return exit_code(rec)


def job_id(rec: dict) -> str:
    if rec.get("array_job_id"):
        return f"{rec['array_job_id']}_{rec['array_task_id']}"
    return str(rec["job_id"])


def _limit(rec: dict) -> str:
    limit = rec.get("time_limit")
    return "UNLIMITED" if limit is None else hms(limit * 60)


def _user(rec: dict) -> str:
    return rec.get("user") or str(rec.get("uid", ""))


def _group(rec: dict) -> str:
    import grp

    gid = rec.get("gid")
    if gid is None:
        return ""
    try:
        return grp.getgrgid(int(gid)).gr_name
    except (KeyError, TypeError, ValueError):
        return str(gid)


def _derived(rec: dict) -> str:
    if rec.get("steps"):  # the highest exit code of its steps (rrun's)
        from ranch.cli.sacct_steps import derived_exit_code

        return derived_exit_code(rec)
    return exit_code(rec) if rec.get("exit_code") else "0:0"


# The job line's values.
JOB: dict[str, Getter] = {
    "Account": lambda r, n: r.get("account") or "",
    "AllocCPUS": lambda r, n: "0" if r["state"] == "PENDING" else str(r.get("cpus") or 0),
    "AllocNodes": lambda r, n: "0" if r["state"] == "PENDING" else str(r.get("node_count") or 0),
    "Cluster": lambda r, n: r.get("cluster") or "",
    "Comment": lambda r, n: r.get("comment") or "",
    "Constraints": lambda r, n: r.get("features") or "",
    "DerivedExitCode": lambda r, n: _derived(r),
    "Elapsed": lambda r, n: hms(elapsed(r, n)),
    "ElapsedRaw": lambda r, n: str(int(elapsed(r, n))),
    "Eligible": lambda r, n: stamp(r.get("eligible_time")),
    "End": lambda r, n: stamp(r.get("end_time")),
    "ExitCode": lambda r, n: exit_code(r),
    "GID": lambda r, n: str(r.get("gid", "")),
    "Group": lambda r, n: _group(r),
    "JobID": lambda r, n: job_id(r),
    "JobIDRaw": lambda r, n: str(r["job_id"]),
    "JobName": lambda r, n: r.get("name") or "",
    "NCPUS": lambda r, n: str(r.get("cpus") or 0),
    "NNodes": lambda r, n: str(r.get("node_count") or 0),
    "NodeList": lambda r, n: r.get("nodes") or "None assigned",
    "NTasks": lambda r, n: "",
    "Partition": lambda r, n: r.get("partition") or "",
    "Priority": lambda r, n: str(r.get("priority") or 0),
    "QOS": lambda r, n: r.get("qos") or "",
    "Reason": lambda r, n: r.get("reason") or "None",
    "ReqCPUS": lambda r, n: str((r.get("ntasks") or 1) * (r.get("cpus_per_task") or 1)),
    "ReqMem": lambda r, n: req_mem(r),
    "ReqNodes": lambda r, n: str(r.get("node_count") or 1),
    "Restarts": lambda r, n: str(r.get("restarts") or 0),
    "Start": lambda r, n: stamp(r.get("start_time")),
    "State": lambda r, n: r["state"],
    "Submit": lambda r, n: stamp(r.get("submit_time")),
    "Suspended": lambda r, n: "00:00:00",
    "Timelimit": lambda r, n: _limit(r),
    "TimelimitRaw": lambda r, n: "UNLIMITED" if r.get("time_limit") is None
    else str(r["time_limit"]),
    "UID": lambda r, n: str(r.get("uid", "")),
    "User": lambda r, n: _user(r),
    "WCKey": lambda r, n: r.get("wckey") or "",
    "WorkDir": lambda r, n: r.get("workdir") or "",
}

# The `.batch` step: its own name, state and exit; the batch host; no partition, user or
# limit (sacct leaves them empty on steps).
STEP_EMPTY = frozenset({"Partition", "User", "UID", "Timelimit", "TimelimitRaw", "Reason",
                        "Priority", "QOS", "WCKey", "Comment", "Constraints", "ReqNodes",
                        "Eligible", "DerivedExitCode", "Group", "GID", "WorkDir",
                        "ReqMem"})


def step_state(rec: dict) -> str:
    """The batch step's state: a job that timed out or was cancelled had its script killed
    (CANCELLED); otherwise the job's own end (COMPLETED, FAILED, OUT_OF_MEMORY...)."""
    state = rec["state"]
    if state in ("TIMEOUT", "CANCELLED", "PREEMPTED", "DEADLINE", "NODE_FAIL"):
        return "CANCELLED" if state != "NODE_FAIL" else "FAILED"
    if state in ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"):
        return "RUNNING"
    return state


def step_value(field: str, rec: dict, now: float) -> str:
    if field in STEP_EMPTY:
        return ""
    if field == "JobID":
        return f"{job_id(rec)}.batch"
    if field == "JobIDRaw":
        return f"{rec['job_id']}.batch"
    if field == "JobName":
        return "batch"
    if field == "State":
        return step_state(rec)
    if field == "ExitCode":
        return step_exit_code(rec)
    if field in ("NodeList",):
        return rec.get("batch_host") or ""
    if field in ("NNodes", "AllocNodes"):
        return "1"
    if field in ("AllocCPUS", "NCPUS"):
        nodes = rec.get("node_count") or 1
        return str(max(1, (rec.get("cpus") or 0) // nodes))
    if field == "NTasks":
        return "1"
    if field == "Submit":
        return stamp(rec.get("start_time"))
    if field in USAGE_FIELDS:
        from ranch.cli.sacct_usage import line_value

        nodes = rec.get("node_count") or 1
        return line_value(field, rec.get("usage"), rec, elapsed(rec, now),
                          max(1, (rec.get("cpus") or 0) // nodes))
    return value(field, rec, now)


def value(field: str, rec: dict, now: float) -> str:
    if field in USAGE_FIELDS:
        from ranch.cli.sacct_usage import job_value

        return job_value(field, rec, elapsed(rec, now))
    getter = JOB.get(field)
    return getter(rec, now) if getter is not None else ""


def has_batch_step(rec: dict) -> bool:
    """A job whose script started has a `.batch` step (a pending or never-started one has
    none, nor has an allocation: ralloc's job, batch_flag 0)."""
    return rec["state"] != "PENDING" and bool(rec.get("batch_host")) and bool(
        rec.get("start_time")) and rec.get("batch_flag", 1) != 0


def rows(records: list[dict], fields: list[tuple[str, int]], now: float, steps: bool
         ) -> list[list[str]]:
    out = []
    for rec in records:
        only = rec.get("_only_steps")  # -j 12.1: that step's line alone (cli/sacct_steps.py)
        if only is None or not steps:
            out.append([value(f, rec, now) for f, _ in fields])
        if steps and has_batch_step(rec) and (only is None or "batch" in only):
            out.append([step_value(f, rec, now) for f, _ in fields])
        if steps and rec.get("steps"):
            from ranch.cli.sacct_steps import step_value as value_of

            out += [[value_of(f, rec, s, now) for f, _ in fields] for s in rec["steps"]
                    if only is None or str(s["id"]) in only]
    return out


def cell(text: str, width: int) -> str:
    """sacct's fixed-width cell: cut to the width with `+` as its last character, padded
    right (positive width) or left (negative)."""
    size = abs(width)
    if len(text) > size:
        text = text[:size - 1] + "+"
    return text.ljust(size) if width < 0 else text.rjust(size)


def table(fields: list[tuple[str, int]], body: list[list[str]], header: bool) -> str:
    lines = []
    if header:
        lines.append(" ".join(_head(f, w) for f, w in fields) + " ")
        lines.append(" ".join("-" * abs(w) for _, w in fields) + " ")
    for row in body:
        lines.append(" ".join(cell(v, w) for v, (_, w) in zip(row, fields, strict=True)) + " ")
    return "".join(line + "\n" for line in lines)


def _head(name: str, width: int) -> str:
    size = abs(width)
    name = name[:size]  # sacct cuts a header without a `+`
    return name.ljust(size) if width < 0 else name.rjust(size)


def parsable(fields: list[tuple[str, int]], body: list[list[str]], header: bool,
             trailing: bool, delimiter: str = "|") -> str:
    end = delimiter if trailing else ""
    lines = [delimiter.join(f for f, _ in fields) + end] if header else []
    lines += [delimiter.join(row) + end for row in body]
    return "".join(line + "\n" for line in lines)


def help_format() -> str:
    """sacct -e: the field names, four to a line."""
    names = list(WIDTHS)
    lines = []
    for i in range(0, len(names), 4):
        lines.append("".join(n.ljust(20) for n in names[i:i + 4]).rstrip())
    return "\n".join(lines) + "\n"
