"""squeue's `-o` letters over job records (docs/internals.md "Job records"), their headers, and
the time and state forms squeue prints."""

from __future__ import annotations

from ranch.statemachine import jobcodes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Getter = Callable[[dict, float], str]
    Column = Callable[[list[dict], float], list[str]]

DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
LONG_FORMAT = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"

# squeue's state codes and order, named once in statemachine/jobcodes.py
COMPACT, LONG, STATE_ORDER = jobcodes.COMPACT, jobcodes.LONG, jobcodes.ORDER
ACTIVE = jobcodes.LISTED_ACTIVE


def duration(seconds: float | None) -> str:
    """squeue's TIME: M:SS, H:MM:SS, D-HH:MM:SS."""
    if seconds is None:
        return "INVALID"
    s = max(0, int(seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    mins, secs = divmod(s, 60)
    if days:
        return f"{days}-{hours:02d}:{mins:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{mins:02d}:{secs:02d}"
    return f"{mins}:{secs:02d}"


def limit_text(minutes: int | None) -> str:
    return "UNLIMITED" if minutes is None else duration(minutes * 60)


def elapsed(job: dict, now: float) -> float:
    start = job.get("start_time")
    if not start or job["state"] == "PENDING":
        return 0.0
    end = job.get("end_time") if job["state"] not in ACTIVE else None
    return (end or now) - start


def job_id_text(job: dict) -> str:
    if job.get("array_job_id"):
        return f"{job['array_job_id']}_{job['array_task_id']}"
    return str(job["job_id"])


def command_path(job: dict) -> str:
    """A batch job's script as slurmctld keeps it: the path sbatch was given, made absolute
    from the directory it was submitted in."""
    command = job.get("command", "")
    if command and command != "(wrap)" and job.get("batch_flag", 1) and job.get("workdir"):
        import posixpath

        return posixpath.join(job["workdir"], command)
    return command


def reason_text(job: dict) -> str:
    return job.get("reason") or "None"


def nodelist_reason(job: dict) -> str:
    if job["state"] == "PENDING":
        return f"({reason_text(job)})"
    return job.get("nodes") or ""


def priority(job: dict) -> int:
    """A held job's priority is 0, as Slurm holds jobs (by zeroing it)."""
    return 0 if job.get("held") else int(job.get("priority") or 0)


def _iso(epoch: float | None) -> str:
    from ranch.conf.timefmt import slurm_timestamp  # only when a time is shown

    return slurm_timestamp(epoch or 0, "N/A")


def _tres_per_node(job: dict) -> str:
    g = job.get("gpus_per_node") or 0
    return f"gres/gpu:{g}" if g else "N/A"


def _mem(job: dict) -> str:
    mib = job.get("mem_per_node") or 0
    if not mib:
        return "0"
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


def _time_left(job: dict, now: float) -> str:
    limit = job.get("time_limit")
    if limit is None:
        return "UNLIMITED"
    # whole seconds used, as squeue counts them (time_t): 5:00 left at 0:00 of a 5-minute limit
    return duration(limit * 60 - int(elapsed(job, now)))


# letter -> (header, value)
FIELDS: dict[str, tuple[str, Getter]] = {
    "i": ("JOBID", lambda j, n: job_id_text(j)),
    "A": ("JOBID", lambda j, n: str(j["job_id"])),
    "F": ("ARRAY_JOB_ID", lambda j, n: str(j.get("array_job_id") or j["job_id"])),
    "K": ("ARRAY_TASK_ID", lambda j, n: "N/A" if j.get("array_task_id") is None
          else j.get("array_tasks") or str(j["array_task_id"])),
    "j": ("NAME", lambda j, n: j.get("name", "")),
    "u": ("USER", lambda j, n: j.get("user", "")),
    "U": ("UID", lambda j, n: str(j.get("uid", ""))),
    "g": ("GROUP", lambda j, n: _group(j.get("gid"))),
    "G": ("GROUP", lambda j, n: str(j.get("gid", ""))),
    "P": ("PARTITION", lambda j, n: j.get("partition", "")),
    "t": ("ST", lambda j, n: COMPACT.get(j["state"], j["state"])),
    "T": ("STATE", lambda j, n: j["state"]),
    "M": ("TIME", lambda j, n: duration(elapsed(j, n))),
    "l": ("TIME_LIMIT", lambda j, n: limit_text(j.get("time_limit"))),
    "L": ("TIME_LEFT", _time_left),
    "D": ("NODES", lambda j, n: str(j.get("node_count", 0))),
    "C": ("CPUS", lambda j, n: str(j.get("cpus", 0))),
    "c": ("MIN_CPUS", lambda j, n: str(j.get("cpus_per_task", 1))),
    "m": ("MIN_MEMORY", lambda j, n: _mem(j)),
    "b": ("TRES_PER_NODE", lambda j, n: _tres_per_node(j)),
    "N": ("NODELIST", lambda j, n: j.get("nodes") or ""),
    "R": ("NODELIST(REASON)", lambda j, n: nodelist_reason(j)),
    "r": ("REASON", lambda j, n: reason_text(j)),
    "n": ("REQ_NODES", lambda j, n: j.get("req_nodes") or ""),
    "x": ("EXC_NODES", lambda j, n: j.get("exc_nodes") or ""),
    "B": ("EXEC_HOST", lambda j, n: j.get("batch_host") or "n/a"),
    "V": ("SUBMIT_TIME", lambda j, n: _iso(j.get("submit_time"))),
    "S": ("START_TIME", lambda j, n: _iso(j.get("start_time"))),
    "e": ("END_TIME", lambda j, n: _iso(j.get("end_time"))),
    "Q": ("PRIORITY", lambda j, n: str(priority(j))),
    "p": ("PRIORITY", lambda j, n: f"{(priority(j) / 4294967295):16.14f}"),
    "Z": ("WORK_DIR", lambda j, n: j.get("workdir", "")),
    "o": ("COMMAND", lambda j, n: command_path(j)),
    "h": ("OVER_SUBSCRIBE", lambda j, n: j.get("oversubscribe")
          or ("NO" if j.get("exclusive") else "OK")),
    "y": ("NICE", lambda j, n: str(j.get("nice") or 0)),
    "a": ("ACCOUNT", lambda j, n: j.get("account") or "(null)"),
    "q": ("QOS", lambda j, n: j.get("qos") or "(null)"),
    "k": ("COMMENT", lambda j, n: j.get("comment") or "(null)"),
    "w": ("WCKEY", lambda j, n: j.get("wckey") or "(null)"),
    "E": ("DEPENDENCY", lambda j, n: j.get("dependency") or "(null)"),
    "f": ("FEATURES", lambda j, n: j.get("features") or "(null)"),
    "v": ("RESERVATION", lambda j, n: "(null)"),
    "O": ("CONTIGUOUS", lambda j, n: "0"),
    "d": ("MIN_TMP_DISK", lambda j, n: "0"),
    # what Ranch has no notion of (sockets, cores and threads requests, licenses, core
    # specialisation, planned nodes), as squeue prints it for a job without one
    "s": ("", lambda j, n: ""),  # select/cons_tres's job info: nothing
    "z": ("S:C:T", lambda j, n: "*:*:*"),
    "H": ("SOCKETS_PER_NODE", lambda j, n: "*"),
    "I": ("CORES_PER_SOCKET", lambda j, n: "*"),
    "J": ("THREADS_PER_CORE", lambda j, n: "*"),
    "W": ("LICENSES", lambda j, n: "(null)"),
    "X": ("CORE_SPEC", lambda j, n: "N/A"),
    # sched/backfill's nodes for a waiting job (issue 44)
    "Y": ("SCHEDNODES", lambda j, n: j.get("sched_nodes") or "(null)"),
}


# squeue's `%all` (src/squeue/opts.c): every letter, `|` between them
ALL = "|".join(f"%{c}" for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# The letters whose values squeue does not cut to a right-justified column's width (print.c's
# _print_str with cut_output false: node lists and times, not %R's reasons nor UNLIMITED; a
# left-justified column is cut all the same, by printf's precision), and those whose header it
# does not cut either.
UNCUT = frozenset("NYlLMR")
UNCUT_HEADER = frozenset("NYR")


def _time_column(jobs: list[dict], now: float) -> list[str]:
    return ["0:00" if j["state"] == "PENDING" or not j.get("start_time")
            else duration(elapsed(j, now)) for j in jobs]


# The default and -l views' letters as whole columns, each one comprehension over the jobs:
# the same values as FIELDS gives cell by cell, without a call or two per cell (with 5,000
# jobs queued those calls were half of rqueue's own time; tests/cli/test_rqueue_columns.py).
COLUMNS: dict[str, Column] = {
    "i": lambda jobs, n: [f"{j['array_job_id']}_{j['array_task_id']}" if j.get("array_job_id")
                          else str(j["job_id"]) for j in jobs],
    "P": lambda jobs, n: [j.get("partition", "") for j in jobs],
    "j": lambda jobs, n: [j.get("name", "") for j in jobs],
    "u": lambda jobs, n: [j.get("user", "") for j in jobs],
    "t": lambda jobs, n: [COMPACT.get(s, s) for s in [j["state"] for j in jobs]],
    "T": lambda jobs, n: [j["state"] for j in jobs],
    "M": _time_column,
    "l": lambda jobs, n: [limit_text(j.get("time_limit")) for j in jobs],
    "D": lambda jobs, n: [str(j.get("node_count", 0)) for j in jobs],
    "R": lambda jobs, n: [f"({j.get('reason') or 'None'})" if j["state"] == "PENDING"
                          else j.get("nodes") or "" for j in jobs],
}

# squeue -O/--Format names (lower case) -> a letter above, or (header, value) of their own.
LONG_FIELDS: dict[str, str | tuple[str, Getter]] = {
    "account": "a", "jobid": "A", "batchhost": "B", "mincpus": "c", "numcpus": "C",
    "mintmpdisk": "d", "numnodes": "D", "endtime": "e", "dependency": "E", "feature": "f",
    "arrayjobid": "F", "groupname": "g", "groupid": "G", "oversubscribe": "h",
    "jobarrayid": "i", "name": "j", "comment": "k", "arraytaskid": "K", "timelimit": "l",
    "timeleft": "L", "minmemory": "m", "timeused": "M", "reqnodes": "n", "nodelist": "N",
    "command": "o", "contiguous": "O", "priority": "p", "partition": "P", "qos": "q",
    "prioritylong": "Q", "reason": "r", "reasonlist": "R", "starttime": "S",
    "statecompact": "t", "state": "T", "userid": "U", "username": "u", "reservation": "v",
    "submittime": "V", "wckey": "w", "nice": "y", "workdir": "Z", "excnodes": "x",
    "tres-per-node": "b", "schednodes": "Y",
    "numtasks": ("TASKS", lambda j, n: str(j.get("ntasks", 1))),
    "cpuspertask": ("CPUS_PER_TASK", lambda j, n: str(j.get("cpus_per_task", 1))),
    "cpus-per-task": ("CPUS_PER_TASK", lambda j, n: str(j.get("cpus_per_task", 1))),
    "eligibletime": ("ELIGIBLE_TIME", lambda j, n: _iso(j.get("eligible_time"))),
    "ntpernode": ("NTASKS_PER_NODE", lambda j, n: str(j.get("ntasks_per_node") or 0)),
    "requeue": ("REQUEUE", lambda j, n: "1" if j.get("requeue") else "0"),
    "restartcnt": ("RESTART_COUNT", lambda j, n: str(j.get("restarts", 0))),
    "stdout": ("STDOUT", lambda j, n: _path(j, "stdout")),
    "stderr": ("STDERR", lambda j, n: _path(j, "stderr") or _path(j, "stdout")),
    "stdin": ("STDIN", lambda j, n: _path(j, "stdin") or "/dev/null"),
    "batchflag": ("BATCH_FLAG", lambda j, n: "1"),
    "maxnodes": ("MAX_NODES", lambda j, n: str(j.get("node_count", 1))),
    "pendingtime": ("PENDING_TIME", lambda j, n: _pending_time(j, n)),
    "exit_code": ("EXIT_CODE", lambda j, n: str(_wait_status(j))),
    "derivedec": ("DERIVED_EC", lambda j, n: str(_wait_status(j))),
    "maxcpus": ("MAX_CPUS", lambda j, n: str(j.get("cpus", 0))),
    "accruetime": ("ACCRUE_TIME", lambda j, n: "N/A" if j.get("held") or not j.get(
        "eligible_time") else _iso(j["eligible_time"])),
    "allocnodes": ("ALLOC_NODES", lambda j, n: j.get("submit_host") or "(null)"),
    "cluster": ("CLUSTER", lambda j, n: j.get("cluster", "")),
    # Ranch keeps neither the submitter's session id nor a per-job time of the scheduler's
    # last look (value_differences.py): 0, as `rcontrol show job`'s AllocNode:Sid, and N/A
    "allocsid": ("ALLOC_SID", lambda j, n: "0"),
    "lastschedeval": ("LAST_SCHED_EVAL", lambda j, n: "N/A"),
}

# squeue -O fields of what Ranch has no notion of (boards, sockets and cores requests,
# burst buffers, licenses, heterogeneous jobs, federation, preemption, resizing, accounting
# associations, MCS labels, switches, containers): squeue's words for a job without one, which
# every Ranch job is. name -> (header, the value)
_NONE: dict[str, tuple[str, str]] = {
    "admin_comment": ("ADMIN_COMMENT", "(null)"), "associd": ("ASSOC_ID", "0"),
    "boardspernode": ("BOARDS_PER_NODE", "0"), "burstbuffer": ("BURST_BUFFER", "(null)"),
    "burstbufferstate": ("BURST_BUFFER_STATE", "(null)"),
    "clusterfeature": ("CLUSTER_FEATURES", "(null)"), "container": ("CONTAINER", "(null)"),
    "cores": ("CORES_PER_SOCKET", "*"), "corespec": ("CORE_SPEC", "N/A"),
    "deadline": ("DEADLINE", "N/A"), "delayboot": ("DELAY_BOOT", "0:00"),
    "hetjobid": ("HET_JOB_ID", "N/A"), "hetjobidset": ("HET_JOB_ID_SET", "N/A"),
    "hetjoboffset": ("HET_JOB_OFFSET", "N/A"), "licenses": ("LICENSES", "(null)"),
    "mcslabel": ("MCSLABEL", "(null)"), "mintime": ("TIME_MIN", "0:00"),
    "network": ("NETWORK", "(null)"), "ntperboard": ("NTASKS_PER_BOARD", "0"),
    "ntpercore": ("NTASKS_PER_CORE", "N/A"), "ntpersocket": ("NTASKS_PER_SOCKET", "N/A"),
    "origin": ("ORIGIN", "NA"), "originraw": ("ORIGIN_RAW", "NA"),
    "preempttime": ("PREEMPT_TIME", "N/A"), "prefer": ("PREFER", "(null)"),
    "profile": ("PROFILE", "NotSet"), "reboot": ("REBOOT", "0"), "reqswitch": ("REQ_SWITCH", "0"),
    "resizetime": ("RESIZE_TIME", "N/A"),
    "sct": ("S:C:T", "*:*:*"), "selectjobinfo": ("", ""),  # select/cons_tres prints nothing
    "siblingsactive": ("ACTIVE_SIBLINGS", "NA"), "siblingsactiveraw": ("ACTIVE_SIBLINGS_RAW", "NA"),
    "siblingsviable": ("VIABLE_SIBLINGS", "NA"),
    "siblingsviableraw": ("VIALBLE_SIBLINGS_RAW", "NA"),  # sic: squeue 22.05's header
    "sockets": ("SOCKETS_PER_NODE", "*"), "sperboard": ("SOCKETS_PER_BOARD", "0"),
    "system_comment": ("SYSTEM_COMMENT", "(null)"), "threads": ("THREADS_PER_CORE", "*"),
    "wait4switch": ("WAIT4SWITCH", "0:00"),
}


def _same(value: str) -> Getter:
    """A field squeue prints alike for every job."""
    return lambda j, n: value


for _name, (_header, _value) in _NONE.items():
    LONG_FIELDS[_name] = (_header, _same(_value))


def _wait_status(job: dict) -> int:
    """The exit status as squeue -O prints it: the raw wait status (exit code << 8 | signal)."""
    return (int(job.get("exit_code") or 0) & 0xFF) << 8 | int(job.get("signal") or 0) & 0x7F


def _pending_time(job: dict, now: float) -> str:
    """squeue's PENDING_TIME: seconds from submission to start (to now, before it starts)."""
    start = job.get("start_time") if job["state"] != "PENDING" else None
    return str(max(0, int((start or now) - (job.get("submit_time") or now))))


def _path(job: dict, key: str) -> str:
    from ranch.protocol.outputpath import expand_path

    return expand_path(job.get(key) or "", job)

_groups: dict[int, str] = {}


def _group(gid: int | None) -> str:
    if gid is None:
        return ""
    name = _groups.get(gid)
    if name is None:
        import grp

        try:
            name = grp.getgrgid(gid).gr_name
        except KeyError:
            name = str(gid)
        _groups[gid] = name
    return name
