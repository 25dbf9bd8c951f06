"""`rcontrol show job [ID]` (scontrol's Key=Value layout, -o, --json) and
`rcontrol requeue|hold|release ID...`."""

from __future__ import annotations

import os
import re
import sys
import time

from cli.controller import CliError, Target

JOB_ACTIONS = ("requeue", "hold", "release")
_PATTERN = re.compile(r"%(%|\d*)([aAjJnNstux]?)")


def _iso(epoch: float | None, missing: str = "Unknown") -> str:
    if not epoch:
        return missing
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def _clock(seconds: float) -> str:
    """scontrol's RunTime/TimeLimit: HH:MM:SS or D-HH:MM:SS."""
    s = max(0, int(seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    mins, secs = divmod(s, 60)
    text = f"{hours:02d}:{mins:02d}:{secs:02d}"
    return f"{days}-{text}" if days else text


def expand_path(pattern: str, j: dict) -> str:
    """The file as the batch node will name it (rnoded's noded/jobenv.py rules: %j %J %A %a %x
    %u %N %n %t %s %% and widths), under the workdir."""
    if not pattern:
        return ""
    if "\\" in pattern:
        path = re.sub(r"\\(.?)", r"\1", pattern, flags=re.DOTALL)
    else:
        task = j.get("array_task_id")
        nums = {"j": str(j["job_id"]), "J": str(j["job_id"]),
                "A": str(j.get("array_job_id") or j["job_id"]),
                "a": str(task if task is not None else 4294967294), "n": "0", "t": "0"}
        words = {"x": j.get("name", ""), "u": j.get("user", ""),
                 "N": j.get("batch_host") or "", "s": "batch"}

        def one(m: re.Match[str]) -> str:
            width, letter = m.groups()
            if width == "%":
                return "%" + letter
            if letter in words:
                return words[letter]
            if letter in nums:
                return nums[letter].zfill(min(int(width), 10)) if width else nums[letter]
            return m.group(0)

        path = _PATTERN.sub(one, pattern)
    return path if path.startswith("/") else os.path.join(j.get("workdir", ""), path)


def _mem_text(mib: int) -> str:
    """scontrol's memory figures (convert_num_unit): 500M, 4G, 1.50G."""
    if mib and mib % 1024 == 0:
        return f"{mib // 1024}G" if mib % (1024 * 1024) else f"{mib // (1024 * 1024)}T"
    if mib >= 1024:
        return f"{mib / 1024:.2f}G"
    return f"{mib}M"


def job_lines(j: dict, now: float) -> list[str]:
    from cli.squeue_fields import elapsed

    first = f"JobId={j['job_id']}"
    if j.get("array_job_id"):
        first += f" ArrayJobId={j['array_job_id']} ArrayTaskId={j['array_task_id']}"
    limit = j.get("time_limit")
    mem = j.get("mem_per_node") or 0
    cpus = j.get("cpus", 0)
    nodes = j.get("nodes") or "(null)"
    tres = f"cpu={cpus},mem={mem}M,node={j.get('node_count', 1)},billing={cpus}"
    if j.get("gpus_per_node"):
        tres += f",gres/gpu={j['gpus_per_node'] * j.get('node_count', 1)}"
    stdout = expand_path(j.get("stdout", ""), j)
    stderr = expand_path(j.get("stderr", ""), j) or stdout
    prio = f"Priority={j.get('priority', 0)} Nice={j.get('nice') or 0} " \
           f"Account={j.get('account') or '(null)'} QOS={j.get('qos') or '(null)'}"
    if j.get("wckey"):
        prio += f" WCKey={j['wckey']}"
    lines = [
        f"{first} JobName={j.get('name', '')}",
        f"UserId={j.get('user', '')}({j.get('uid', '')}) GroupId={_group(j.get('gid'))}"
        f"({j.get('gid', '')}) MCS_label=N/A",
        prio,
        f"JobState={j['state']} Reason={j.get('reason') or 'None'} "
        f"Dependency={j.get('dependency') or '(null)'}",
        f"Requeue={int(bool(j.get('requeue')))} Restarts={j.get('restarts', 0)} BatchFlag=1 "
        f"Reboot=0 ExitCode={j.get('exit_code', 0)}:{j.get('signal', 0)}",
        f"RunTime={_clock(elapsed(j, now))} "
        f"TimeLimit={'UNLIMITED' if limit is None else _clock(limit * 60)} TimeMin=N/A",
        f"SubmitTime={_iso(j.get('submit_time'))} "
        f"EligibleTime={_iso(j.get('eligible_time') or j.get('submit_time'))}",
        f"StartTime={_iso(j.get('start_time'))} EndTime={_iso(j.get('end_time'))} "
        "Deadline=N/A",
        f"Partition={j.get('partition', '')} AllocNode:Sid={j.get('submit_host') or '?'}:0",
        f"ReqNodeList={j.get('req_nodes') or '(null)'} "
        f"ExcNodeList={j.get('exc_nodes') or '(null)'}",
        f"NodeList={nodes if j['state'] != 'PENDING' else '(null)'}",
        f"BatchHost={j.get('batch_host') or '(null)'}",
        f"NumNodes={j.get('node_count', 1)} NumCPUs={cpus} NumTasks={j.get('ntasks', 1)} "
        f"CPUs/Task={j.get('cpus_per_task', 1)} ReqB:S:C:T=0:0:*:*",
        f"TRES={tres}",
    ]
    if j.get("ntasks_per_node"):
        lines.append(f"Socks/Node=* NtasksPerN:B:S:C={j['ntasks_per_node']}:0:*:* CoreSpec=*")
    min_mem = (f"MinMemoryCPU={_mem_text(j['mem_per_cpu'])}" if j.get("mem_per_cpu")
               else f"MinMemoryNode={_mem_text(mem) if mem else '0'}")
    lines += [
        f"MinCPUsNode={j.get('cpus_per_task', 1)} {min_mem} MinTmpDiskNode=0",
        f"Features={j.get('features') or '(null)'} DelayBoot=00:00:00",
        f"OverSubscribe={_oversubscribe(j)} Contiguous=0 Licenses=(null) Network=(null)",
        f"Command={j.get('command', '')}",
        f"WorkDir={j.get('workdir', '')}",
    ]
    if j.get("comment"):
        lines.append(f"Comment={j['comment']} ")
    if j.get("message"):
        lines.append(f"SystemComment={j['message']} ")
    stdin = expand_path(j["stdin"], j) if j.get("stdin") else "/dev/null"
    lines += [f"StdErr={stderr}", f"StdIn={stdin}", f"StdOut={stdout}", "Power="]
    if j.get("kill_on_invalid_dep") is not None:
        lines.append(f"KillOInInvalidDependent={'Yes' if j['kill_on_invalid_dep'] else 'No'}")
    if j.get("cpus_per_gpu"):
        lines.append(f"CpusPerTres=gres:gpu:{j['cpus_per_gpu']}")
    if j.get("mem_per_gpu"):
        lines.append(f"MemPerTres=gres:gpu:{j['mem_per_gpu']}")
    if j.get("gpus_per_node") and not j.get("gpus_per_task"):
        lines.append(f"TresPerNode=gres:gpu:{j['gpus_per_node']}")
    if j.get("gpus_per_task"):
        lines.append(f"TresPerTask=gres:gpu:{j['gpus_per_task']}")
    if j.get("mail_type"):
        lines.append(f"MailUser={j.get('mail_user', '')} MailType={','.join(j['mail_type'])}")
    if j.get("gpu_indices"):
        lines.append("GresDetail=" + ",".join(
            f"{n}:gpu:{len(v)}(IDX:{','.join(map(str, v))})"
            for n, v in sorted(j["gpu_indices"].items())))
    return lines


def _oversubscribe(j: dict) -> str:
    if j.get("oversubscribe"):
        return j["oversubscribe"]
    return "NO" if j.get("exclusive") else "OK"


def _group(gid: int | None) -> str:
    from cli.squeue_fields import _group as name

    return name(gid)


def show_jobs(target: Target, ident: str | None, *, one_line: bool, as_json: bool,
              json_doc) -> int:
    from cli.job_requests import fetch_jobs, parse_job_ids
    from cli.show_records import records_text

    now, jobs = fetch_jobs(target)
    now = now or time.time()
    if ident is not None:
        ids = set(parse_job_ids([ident], jobs))
        jobs = [j for j in jobs if j["job_id"] in ids or j.get("array_job_id") in ids]
        if not jobs:
            raise CliError(f"Invalid job id specified: {ident}")
    jobs.sort(key=lambda j: j["job_id"])
    if as_json:
        from cli.squeue_json import job_doc

        sys.stdout.write(json_doc("jobs", [job_doc(j) for j in jobs], ""))
        return 0
    if not jobs:
        print("No jobs in the system")
        return 0
    sys.stdout.write(records_text([job_lines(j, now) for j in jobs], one_line=one_line))
    return 0


def job_action(target: Target, action: str, words: list[str]) -> int:
    import getpass

    from cli.controller import request
    from cli.job_requests import fetch_jobs, parse_job_ids

    if not words:
        raise CliError(f"{action} needs a job id", code=2)
    jobs = fetch_jobs(target)[1] if any("_" in w for w in words) else None
    ids = parse_job_ids(words, jobs)
    body = {"action": action, "job_ids": list(ids), "user": getpass.getuser(),
            "uid": os.getuid()}
    result = request(target, "JobControl", body, want="JobResult", timeout=30.0)
    for err in result.get("errors") or ():
        print(f"rcontrol: error: {err}", file=sys.stderr)
    return 0 if result.get("ok") is True else 1


def update_job(target: Target, words: list[str]) -> int:
    """`update JobId=ID[,ID...] StartTime=TIME`: a pending job's BeginTime (rbatch --begin)."""
    import getpass
    import time

    from cli.begin_time import BeginError, parse_begin
    from cli.controller import request
    from cli.job_requests import fetch_jobs, parse_job_ids

    ids: list[str] = []
    begin = None
    for word in words:
        key, sep, value = word.partition("=")
        if not sep:
            raise CliError(f"update: expected Key=Value, got {word!r}", code=2)
        if key.lower() == "jobid":
            ids += [w for w in value.split(",") if w]
        elif key.lower() in ("starttime", "begintime"):
            try:
                begin = parse_begin(value, time.time())
            except BeginError as exc:
                raise CliError(str(exc).replace("--begin=", "StartTime="), code=2) from None
        else:
            raise CliError(f"update: {key!r} is not supported for jobs (Ranch updates "
                           "JobId=... StartTime=...)", code=2)
    if not ids:
        raise CliError("update: JobId= names no job", code=2)
    if begin is None:
        raise CliError("update: nothing to change; give StartTime=", code=2)
    jobs = fetch_jobs(target)[1] if any("_" in w for w in ids) else None
    body = {"action": "begin", "job_ids": list(parse_job_ids(ids, jobs)),
            "user": getpass.getuser(), "uid": os.getuid(), "begin_time": begin}
    result = request(target, "JobControl", body, want="JobResult", timeout=30.0)
    for err in result.get("errors") or ():
        print(f"rcontrol: error: {err}", file=sys.stderr)
    return 0 if result.get("ok") is True else 1

