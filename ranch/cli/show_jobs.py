"""`rcontrol show job [ID]` (scontrol's Key=Value layout, -o, --json) and
`rcontrol requeue|hold|release ID...`."""

from __future__ import annotations

import os
import re
import sys
import time

from ranch.cli.controller import CliError, Target
from ranch.cli.slurm_names import prog
from ranch.protocol.outputpath import expand_path

JOB_ACTIONS = ("requeue", "hold", "release")
_PATTERN = re.compile(r"%(%|\d*)([aAjJnNstux]?)")


def _iso(epoch: float | None, missing: str = "Unknown") -> str:
    from ranch.conf.timefmt import slurm_timestamp  # only when a time is shown

    return slurm_timestamp(epoch or 0, missing)


def _clock(seconds: float) -> str:
    """scontrol's RunTime/TimeLimit: HH:MM:SS or D-HH:MM:SS."""
    s = max(0, int(seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    mins, secs = divmod(s, 60)
    text = f"{hours:02d}:{mins:02d}:{secs:02d}"
    return f"{days}-{text}" if days else text


def _mem_text(mib: int) -> str:
    """Slurm's exact unit conversion of a MiB count: 0, 512M, 4G, 1536M."""
    if not mib:
        return "0"
    for unit in ("M", "G", "T"):
        if mib % 1024 or unit == "T":
            return f"{mib}{unit}"
        mib //= 1024
    return f"{mib}T"


def _tres(j: dict) -> str:
    """TRES: what the job holds, in total; no mem= for a job that asked for none. A pending
    job spread over nodes (-n without -N) counts the nodes it asked for, as slurmctld does
    before it places the job (-n 3 on 2-CPU nodes: node=1), -w's at least."""
    cpus, nodes = j.get("cpus", 0), j.get("node_count", 1)
    if j.get("state") == "PENDING" and j.get("max_nodes") == 0 and j.get("min_nodes"):
        nodes = j["min_nodes"]
        if j.get("req_nodes"):
            from ranch.conf.hostlist import expand

            nodes = max(nodes, len(expand(j["req_nodes"])))
    items = [f"cpu={cpus}"]
    if j.get("mem_per_node"):
        items.append(f"mem={_mem_text(j['mem_per_node'] * nodes)}")
    items += [f"node={nodes}", f"billing={cpus}"]
    if j.get("gpus_per_node"):
        items.append(f"gres/gpu={j['gpus_per_node'] * nodes}")
    return ",".join(items)


def _node_list(j: dict) -> str:
    """NodeList: (null) while pending, empty for a job that ended without ever getting nodes."""
    if j.get("nodes"):
        return j["nodes"]
    # a waiting job sched/backfill planned: empty beside its SchedNodeList (22.05 prints it so)
    return "(null)" if j["state"] == "PENDING" and not j.get("sched_nodes") else ""


def _started(j: dict) -> float | None:
    """When it started (a waiting job's start_time is sched/backfill's estimate)."""
    return None if j["state"] == "PENDING" else j.get("start_time")


def _end_time(j: dict) -> str:
    """EndTime: when it ended, or when its time limit will end it (Unknown without one)."""
    end = j.get("end_time")
    if not end and j["state"] == "RUNNING" and j.get("start_time") and \
            j.get("time_limit") is not None:
        end = j["start_time"] + j["time_limit"] * 60
    return _iso(end)


def job_lines(j: dict, now: float) -> list[str]:
    """One job as `scontrol show job` prints it (22.05's keys, in its order)."""
    return [*_state_lines(j, now), *_resource_lines(j), *_file_lines(j)]


def _shown(j: dict, key: str, option: str) -> str:
    """A value as scontrol shows it: "" given is shown empty, unset as (null)."""
    return j.get(key) or ("" if option in (j.get("given_blank") or ()) else "(null)")


def _state_lines(j: dict, now: float) -> list[str]:
    """JobId to NodeList (BatchHost): who, its state and reason, its times, where it runs."""
    from ranch.cli.squeue_fields import elapsed, priority

    first = f"JobId={j['job_id']}"
    if j.get("array_job_id"):
        first += f" ArrayJobId={j['array_job_id']} ArrayTaskId={j['array_task_id']}"
        if j.get("array_throttle"):
            first += f" ArrayTaskThrottle={j['array_throttle']}"
    limit = j.get("time_limit")
    eligible = _iso(j.get("eligible_time") if "eligible_time" in j else j.get("submit_time"))
    prio = f"Priority={priority(j)} Nice={j.get('nice') or 0} " \
           f"Account={_shown(j, 'account', 'account')} QOS={j.get('qos') or '(null)'}"
    if j.get("wckey"):
        prio += f" WCKey={j['wckey']}"
    lines = [
        f"{first} JobName={j.get('name', '')}",
        f"UserId={j.get('user', '')}({j.get('uid', '')}) GroupId={_group(j.get('gid'))}"
        f"({j.get('gid', '')}) MCS_label=N/A",
        prio,
        # scontrol writes a reason's blanks as underscores (squeue keeps them)
        f"JobState={j['state']} Reason={(j.get('reason') or 'None').replace(' ', '_')} "
        f"Dependency={j.get('dependency') or '(null)'}",
        f"Requeue={int(bool(j.get('requeue')))} Restarts={j.get('restarts', 0)} "
        f"BatchFlag={j.get('batch_flag', 1)} "
        f"Reboot=0 ExitCode={j.get('exit_code', 0)}:{j.get('signal', 0)}",
        f"RunTime={_clock(elapsed(j, now))} "
        f"TimeLimit={'UNLIMITED' if limit is None else _clock(limit * 60)} TimeMin=N/A",
        f"SubmitTime={_iso(j.get('submit_time'))} EligibleTime={eligible}",
        f"AccrueTime={_iso(j['accrue_time']) if 'accrue_time' in j else eligible}",
        f"StartTime={_iso(j.get('start_time'))} EndTime={_end_time(j)} Deadline=N/A",
        "SuspendTime=None SecsPreSuspend=0 "
        f"LastSchedEval={_iso(_started(j) or j.get('submit_time'))} Scheduler=Main",
        f"Partition={j.get('partition', '')} AllocNode:Sid={j.get('submit_host') or '?'}:0",
        f"ReqNodeList={_shown(j, 'req_nodes', 'nodelist')} "
        f"ExcNodeList={_shown(j, 'exc_nodes', 'exclude')}",
        # sched/backfill's nodes for a waiting job, on the same line (22.05's job_info.c)
        f"NodeList={_node_list(j)}"
        + (f" SchedNodeList={j['sched_nodes']}" if j.get("sched_nodes") else ""),
    ]
    if j.get("batch_host"):
        lines.append(f"BatchHost={j['batch_host']}")
    return lines


def _resource_lines(j: dict) -> list[str]:
    """NumNodes to WorkDir: what the job asked for and holds, its command and directory."""
    mem = j.get("mem_per_node") or 0
    cpus = j.get("cpus", 0)
    command = j.get("command", "")
    ntasks_per = j.get("ntasks_per_node") or 0
    min_mem = (f"MinMemoryCPU={_mem_text(j['mem_per_cpu'])}" if j.get("mem_per_cpu")
               else f"MinMemoryNode={_mem_text(mem)}")
    return [
        f"NumNodes={_num_nodes(j)} NumCPUs={cpus} NumTasks={_num_tasks(j)} "
        f"CPUs/Task={j.get('cpus_per_task', 1)} ReqB:S:C:T={_req_bsct(j.get('hint'))}",
        f"TRES={_tres(j)}",
        f"Socks/Node=* NtasksPerN:B:S:C={ntasks_per}:0:*:* CoreSpec=*",
        # slurmctld: a node must hold the CPUs of each task it runs (ntasks-per-node of them)
        f"MinCPUsNode={j.get('cpus_per_task', 1) * (ntasks_per or 1)} {min_mem} "
        "MinTmpDiskNode=0",
        f"Features={_shown(j, 'features', 'constraint')} DelayBoot=00:00:00",
        f"OverSubscribe={_oversubscribe(j)} Contiguous=0 Licenses=(null) Network=(null)",
        # --wrap has no script path: Slurm prints its null
        f"Command={command if command and command != '(wrap)' else '(null)'}",
        f"WorkDir={j.get('workdir', '')}",
    ]


def _file_lines(j: dict) -> list[str]:
    """Comment to Power: the job's files, and the keys scontrol prints only when set."""
    blank = j.get("given_blank") or ()
    stdout = expand_path(j.get("stdout", ""), j)
    stderr = expand_path(j.get("stderr", ""), j) or stdout
    lines = []
    if j.get("comment") or "comment" in blank:
        lines.append(f"Comment={j.get('comment') or ''} ")
    if j.get("message"):
        lines.append(f"SystemComment={j['message']} ")
    stdin = expand_path(j["stdin"], j) if j.get("stdin") else "/dev/null"
    if j.get("batch_flag", 1):  # an allocation (ralloc) has no output files: Slurm omits them
        lines += [f"StdErr={stderr}", f"StdIn={stdin}", f"StdOut={stdout}"]
    if j.get("kill_on_invalid_dep") is not None:
        lines.append(f"KillOInInvalidDependent={'Yes' if j['kill_on_invalid_dep'] else 'No'}")
    if j.get("cpus_per_gpu"):
        lines.append(f"CpusPerTres=gres:gpu:{j['cpus_per_gpu']}")
    if j.get("mem_per_gpu") or "mem-per-gpu" in blank:
        lines.append(f"MemPerTres=gres:gpu:{j.get('mem_per_gpu') or 0}")
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
    lines.append("Power=")
    return lines


def _num_tasks(j: dict) -> int | str:
    """NumTasks: -n's count; without -n, a task a node (slurmctld: NumTasks=2 for -N 2) while
    the job waits or once it has held nodes, and N/A for one that ended without ever holding
    any (slurmctld packs the allocation's node count, which such a job never had)."""
    ntasks = j.get("ntasks", 1)
    if j.get("ntasks_given", True):
        return ntasks
    if j["state"] != "PENDING" and not j.get("nodes"):
        return "N/A"
    return max(ntasks, j.get("node_count", 1))




def _num_nodes(j: dict) -> str:
    """NumNodes: while pending, MIN-MAX where -N gave a maximum (`-N 2` is 2-2), as
    slurmctld shows its request; then the nodes it holds."""
    count = j.get("node_count", 1)
    top = j.get("max_nodes")
    return f"{count}-{top}" if top and j.get("state") == "PENDING" else str(count)


def _req_bsct(hint: str | None) -> str:
    """ReqB:S:C:T of --hint (slurm_opt.c): compute_bound and nomultithread ask one thread a
    core, memory_bound one core a socket too."""
    words = set((hint or "").split(","))
    cores = "1" if "memory_bound" in words else "*"
    threads = "1" if words & {"compute_bound", "memory_bound", "nomultithread"} else "*"
    return f"0:0:{cores}:{threads}"


def _oversubscribe(j: dict) -> str:
    if j.get("oversubscribe"):
        return j["oversubscribe"]
    return "NO" if j.get("exclusive") else "OK"


def _group(gid: int | None) -> str:
    from ranch.cli.squeue_fields import _group as name

    return name(gid)


def show_jobs(target: Target, ident: str | None, *, one_line: bool, as_json: bool,
              json_doc) -> int:
    from ranch.cli.job_requests import fetch_jobs, parse_job_ids
    from ranch.cli.show_records import records_text

    now, jobs = fetch_jobs(target, shown=True)
    now = now or time.time()
    if ident is not None:
        ids = set(parse_job_ids([ident], jobs))
        jobs = [j for j in jobs if j["job_id"] in ids or j.get("array_job_id") in ids]
        if not jobs:
            raise CliError(f"Invalid job id specified: {ident}")
    jobs.sort(key=lambda j: j["job_id"])
    if as_json:
        from ranch.cli.squeue_json import job_doc

        sys.stdout.write(json_doc("jobs", [job_doc(j) for j in jobs], ""))
        return 0
    if not jobs:
        print("No jobs in the system")
        return 0
    sys.stdout.write(records_text([job_lines(j, now) for j in jobs], one_line=one_line))
    return 0


def job_action(target: Target, action: str, words: list[str],
               acting: tuple[str, int] | None = None) -> int:
    """hold, release, requeue: asked for as `acting` (user, uid; rcontrol -u), else the
    caller."""
    import getpass

    from ranch.cli.controller import request
    from ranch.cli.job_requests import fetch_jobs, parse_job_ids

    if not words:
        raise CliError(f"{action} needs a job id")
    jobs = fetch_jobs(target)[1] if any("_" in w for w in words) else None
    ids = parse_job_ids(words, jobs)
    user, uid = acting or (getpass.getuser(), os.getuid())
    body = {"action": action, "job_ids": list(ids), "user": user, "uid": uid}
    result = request(target, "JobControl", body, want="JobResult", timeout=30.0)
    if action == "top":  # scontrol_top_job: one code for the list, "TEXT for job LIST"
        for err in (result.get("errors") or ())[:1]:
            print(f"{err} for job {','.join(words).removeprefix('jobid=')}", file=sys.stderr)
        return 0 if result.get("ok") is True else 1
    for err in result.get("errors") or ():
        print(slurm_error(action, err), file=sys.stderr)
    return 0 if result.get("ok") is True else 1


def slurm_error(action: str, err: str) -> str:
    """rctld's `job N: TEXT` as scontrol prints it, `TEXT for job N`; hold, uhold and release
    add the line of the call scontrol makes for them (`slurm_suspend error: TEXT`)."""
    import re

    found = re.fullmatch(r"job (\d+): (.*)", err) or re.fullmatch(
        r"(Invalid job id specified): (\d+)", err)
    if found is None:
        return f"{prog('rcontrol')}: error: {err}"
    jid, text = found.groups() if err.startswith("job ") else found.groups()[::-1]
    line = f"{text} for job {jid}"
    return line + (f"\nslurm_suspend error: {text}" if action in ("hold", "uhold", "release")
                   else "")

