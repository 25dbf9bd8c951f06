"""Job steps as squeue -s and scontrol show step print them, over rctld's job records (a running
job's `steps`, and its `.batch` step, made from the job itself as slurmctld makes it).

Facts measured on Slurm 22.05.8 (tests/conformance/test_step_listings.py compares them): only
running steps are listed (slurmctld forgets a step once it ended); a batch job's `N.batch` step
(name `batch`, the batch host, 1 task, 0 CPUs, the job's start) sorts after `N.0`, `N.1`...;
an invalid `-o` letter or `-O` name is an error line on stderr, the rest still prints (exit 0).
"""

from __future__ import annotations

import sys

BATCH = 0xFFFFFFFB  # Slurm's id of the batch step: it sorts after every numbered step
DEFAULT_FORMAT = "%.15i %.8j %.9P %.8u %.9M %N"


def _iso(epoch: float | None) -> str:
    from ranch.conf.timefmt import slurm_timestamp  # only when a time is shown

    return slurm_timestamp(epoch or 0)


def _job_id(j: dict) -> str:
    if j.get("array_job_id"):
        return f"{j['array_job_id']}_{j['array_task_id']}"
    return str(j["job_id"])


def _mem(mib: int) -> str:
    if not mib:
        return "0"
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


def job_steps(j: dict) -> list[dict]:
    """The running steps of job record `j`, its `.batch` first (callers sort them)."""
    if j.get("state") not in ("RUNNING", "COMPLETING"):
        return []
    base = {"job_id": j["job_id"], "job": _job_id(j), "partition": j.get("partition") or "",
            "user": j.get("user") or str(j.get("uid", "")), "uid": j.get("uid", ""),
            "array_job_id": j.get("array_job_id") or 0,
            "array_task_id": j.get("array_task_id"), "cluster": j.get("cluster") or ""}
    out = []
    if j.get("batch_flag", 1) and j.get("batch_host") and j.get("start_time"):
        out.append({**base, "id": "batch", "key": BATCH, "name": "batch", "state": "RUNNING",
                    "nodes": j["batch_host"], "num_nodes": 1, "ntasks": 1, "cpus": 0,
                    "start_time": j["start_time"], "tres": "(null)", "host": "(null)",
                    "dist": ""})
    mem = j.get("mem_per_node") or 0
    for s in j.get("steps") or ():
        if s.get("state") != "RUNNING":
            continue
        n = s.get("num_nodes") or 1
        out.append({**base, "id": str(s["id"]), "key": int(s["id"]), "name": s.get("name") or "",
                    "state": "RUNNING", "nodes": s.get("nodes") or "", "num_nodes": n,
                    "ntasks": s.get("ntasks") or 0, "cpus": s.get("cpus") or 0,
                    "start_time": s.get("start_time"),
                    "tres": f"cpu={s.get('cpus') or 0},mem={_mem(mem * n)},node={n}",
                    "host": s.get("host") or "(null)",
                    "dist": "Block" if (s.get("ntasks") or 0) > n else "Cyclic"})
    return out


def all_steps(jobs: list[dict], squeue: bool = True) -> list[dict]:
    """Every running step of `jobs`, in squeue -s's order (partition, job, step), or in
    scontrol's (job, then as made: the batch step first)."""
    steps = [s for j in jobs for s in job_steps(j)]
    if squeue:
        steps.sort(key=lambda s: (s["partition"], s["job_id"], s["key"]))
    else:
        steps.sort(key=lambda s: (s["job_id"], s["key"] != BATCH, s["key"]))
    return steps


def step_id(s: dict) -> str:
    return f"{s['job']}.{s['id']}"


# -- squeue -s -----------------------------------------------------------------------------


def _used(s: dict, now: float) -> str:
    from ranch.cli.squeue_fields import duration

    return duration(max(0.0, now - (s.get("start_time") or now)))


# -o letters valid for steps (squeue 22.05 takes no other): header and value
LETTERS = {
    "A": ("TASKS", lambda s, n: str(s["ntasks"])),
    "b": ("TRES_PER_JOB", lambda s, n: "(null)"),
    "i": ("STEPID", lambda s, n: step_id(s)),
    "j": ("NAME", lambda s, n: s["name"]),
    "l": ("TIME_LIMIT", lambda s, n: "UNLIMITED"),
    "M": ("TIME", _used),
    "N": ("NODELIST", lambda s, n: s["nodes"]),
    "P": ("PARTITION", lambda s, n: s["partition"]),
    "S": ("START_TIME", lambda s, n: _iso(s.get("start_time"))),
    "u": ("USER", lambda s, n: s["user"]),
    "U": ("UID", lambda s, n: str(s["uid"])),
}
# -O names valid for steps: header and value
NAMES = {
    "stepid": LETTERS["i"], "stepname": LETTERS["j"], "nodes": LETTERS["N"],
    "numtasks": LETTERS["A"], "username": LETTERS["u"], "userid": LETTERS["U"],
    "partition": LETTERS["P"], "starttime": LETTERS["S"], "timelimit": LETTERS["l"],
    "timeused": LETTERS["M"],
    "stepstate": ("STATE", lambda s, n: s["state"]),
    "numcpus": ("NUM_CPUS", lambda s, n: str(s["cpus"])),
    "jobid": ("JOB_ID", lambda s, n: str(s["job_id"])),
    "arrayjobid": ("ARRAY_JOB_ID", lambda s, n: str(s["array_job_id"])),
    "arraytaskid": ("ARRAY_TASK_ID", lambda s, n: "N/A" if s["array_task_id"] is None
                    else str(s["array_task_id"])),
    "cluster": ("CLUSTER", lambda s, n: s["cluster"]),
    "network": ("NETWORK", lambda s, n: "(null)"),
}


def _tokens(text: str):  # -> Iterator[tuple[int, int, str, str]]
    """(start, end, spec, letter) of each `%[.][digits]X` as squeue -s reads -o (letter "" at
    the end of the text). By hand, not with re: see sinfo_format._tokens."""
    i = text.find("%")
    while i >= 0:
        j = i + 1 + (text[i + 1 : i + 2] == ".")
        while j < len(text) and text[j].isdecimal():
            j += 1
        letter = text[j : j + 1].replace("\n", "")
        end = j + len(letter)
        yield i, end, text[i + 1 : j], letter
        i = text.find("%", end)


def _bad(spec: str, warn: list[str]) -> None:
    warn.append(f"Invalid job step format specification: {spec}")


def short_format(text: str, warn: list[str]):
    """-o for steps: a letter squeue does not take for steps stays in the output as written."""
    from ranch.cli.sinfo_format import Format, parse_format

    kept, valid, pos = [], False, 0
    for start, end, spec, letter in _tokens(text):
        kept.append(text[pos:start])
        pos = end
        if letter in LETTERS:
            kept.append(text[start:end])
            valid = True
        elif letter in ("%", "") and not spec:
            kept.append("%%")
        else:
            _bad(letter, warn)
            kept.append("%" + text[start:end])
    kept.append(text[pos:])
    text = "".join(kept)
    if not valid:  # literal text alone: printed as it is on every line
        return Format("", ()), [], text
    fmt = parse_format(text, frozenset(LETTERS))
    return fmt, [LETTERS[f.letter] for f in fmt.fields], ""


def long_format(text: str, warn: list[str]):
    """-O for steps: `name[:[.]size]` (20 wide when no size is given)."""
    from ranch.cli.sinfo_format import Field, Format

    fields, columns = [], []
    for token in text.split(","):
        name, colon, spec = token.strip().partition(":")
        if not name:
            continue
        column = NAMES.get(name.lower())
        if column is None:
            _bad(name, warn)
            continue
        digits = spec.lstrip(".")
        size = digits if digits.isdigit() else ""
        fields.append(Field("i", int(size) if size else 20 if not colon else 0,
                            spec.startswith("."), ""))
        columns.append(column)
    return Format("", tuple(fields)), columns, ""


def queue_text(steps: list[dict], now: float, *, fmt_text: str | None, long_text: str | None,
               header: bool, prog: str) -> str:
    """squeue -s's lines; invalid fields are reported on stderr, as squeue does."""
    from ranch.cli.sinfo_format import render_table

    warn: list[str] = []
    if long_text and not fmt_text:
        fmt, columns, literal = long_format(long_text, warn)
    else:
        fmt, columns, literal = short_format(fmt_text or DEFAULT_FORMAT, warn)
    for w in warn:
        print(f"{prog}: error: {w}", file=sys.stderr)
    if not fmt.fields:
        lines = [literal.replace("%%", "%")] * (len(steps) + header)
    else:
        rows = [[get(s, now) for _, get in columns] for s in steps]
        lines = render_table(fmt, [h for h, _ in columns], rows, header=header)
    return "".join(line.rstrip() + "\n" for line in lines)


def wanted_steps(text: str) -> set[tuple[int, int]] | None:
    """squeue -s STEPS: `12.0,12.3`; a word without a numbered step selects nothing (as
    squeue 22.05 treats `12.batch`). None: every step."""
    if not text:
        return None
    out = set()
    for word in text.split(","):
        head, _, step = word.strip().partition(".")
        if head.isdigit() and step.isdigit():
            out.add((int(head), int(step)))
    return out


# -- scontrol show step --------------------------------------------------------------------


def step_lines(s: dict) -> list[str]:
    """One step as scontrol show step prints it (22.05's keys, in its order)."""
    return [
        f"StepId={step_id(s)} UserId={s['uid']} StartTime={_iso(s.get('start_time'))} "
        "TimeLimit=UNLIMITED",
        f"State={s['state']} Partition={s['partition']} NodeList={s['nodes']}",
        f"Nodes={s['num_nodes']} CPUs={s['cpus']} Tasks={s['ntasks']} Name={s['name']} "
        "Network=(null)",
        f"TRES={s['tres']}",
        "ResvPorts=(null)",
        "CPUFreqReq=Default" + (f" Dist={s['dist']}" if s["dist"] else ""),
        f"SrunHost:Pid={s['host']}:0",
    ]


def step_json(s: dict) -> dict:
    return {"step_id": step_id(s), "job_id": s["job_id"], "step": s["id"], "name": s["name"],
            "state": s["state"], "user_id": s["uid"], "user_name": s["user"],
            "partition": s["partition"], "nodes": s["nodes"], "node_count": s["num_nodes"],
            "cpus": s["cpus"], "tasks": s["ntasks"],
            "start_time": int(s.get("start_time") or 0), "time_limit": None,
            "tres": "" if s["tres"] == "(null)" else s["tres"],
            "srun_host": "" if s["host"] == "(null)" else s["host"]}


def pick(jobs: list[dict], ident: str | None) -> tuple[list[dict], str | None]:
    """The steps `show step [ID]` shows, or scontrol's words when there are none: ID is
    `12` (every step of job 12) or `12.3` / `12.batch`."""
    steps = all_steps(jobs, squeue=False)
    if ident is None:
        return steps, None if steps else "No job steps in the system"
    head, _, step = ident.partition(".")
    if not head.isdigit():
        return [], f"Invalid job id specified: {ident}"
    jid = int(head)
    if not any(j["job_id"] == jid or j.get("array_job_id") == jid for j in jobs):
        return [], "slurm_get_job_steps error: Invalid job id specified"
    got = [s for s in steps if (s["job_id"] == jid or s["array_job_id"] == jid)
           and (not step or s["id"] == step)]
    return got, None if got else f"Job step {jid}.{step} not found"


def show_steps(target, ident: str | None, *, one_line: bool, as_json: bool, json_doc) -> int:
    """rcontrol show step [ID]: scontrol's Key=Value records, -o one-liners, or --json
    (Ranch's: scontrol 22.05 has no --json)."""
    from ranch.cli.job_requests import fetch_jobs
    from ranch.cli.show_records import records_text

    _, jobs = fetch_jobs(target, shown=True)
    steps, missing = pick(jobs, ident)
    if as_json:
        sys.stdout.write(json_doc("steps", [step_json(s) for s in steps], ""))
        return 0 if steps or ident is None else 1
    if missing is not None:
        if missing.startswith("slurm_get_job_steps"):
            print(missing, file=sys.stderr)
        else:
            print(missing)
        return 0 if ident is None else 1
    sys.stdout.write(records_text([step_lines(s) for s in steps], one_line=one_line))
    return 0
