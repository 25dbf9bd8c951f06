"""rseff JOBID: seff's efficiency report (Slurm 22.05's contribs/seff, version 2.1) over racct's
record of the job: its wording and arithmetic (CPU efficiency = the CPU its steps used over
elapsed x cores; memory = the largest task's peak times its step's tasks, over the memory
requested), and beyond seff the GPUs' utilisation and memory (issue 48)."""

from __future__ import annotations

import math
import sys

from ranch.cli import quickargs
from ranch.cli.controller import CliError, find_target, run_main
from ranch.cli.quickargs import Table

SEFF_VERSION = "2.1"
OPTIONS: Table = (
    (("-h",), {"action": "store_true", "dest": "help", "help": "Help menu"}),
    (("-v",), {"action": "store_true", "dest": "version", "help": "Version"}),
    (("-d",), {"action": "store_true", "dest": "debug", "help": "Debug mode: display raw data"}),
    (("--server",), {"metavar": "HOST:PORT", "help": "controller address (or RANCH_SERVER)"}),
    (("--key-file",), {"metavar": "PATH", "help": "cluster key (or RANCH_KEY_FILE)"}),
    (("--conf",), {"metavar": "PATH", "help": "read controller address and key from this config"}),
)
OWN = ("--server", "--key-file", "--conf")


def usage() -> str:
    return ("Usage: seff [Options] <Jobid>\n       Options:\n       -h    Help menu\n"
            "       -v    Version\n       -d    Debug mode: display raw Slurm data\n")


def time2str(seconds: float) -> str:
    """seff's time2str: [D-]HH:MM:SS of whole seconds."""
    t = int(seconds)
    days, t = divmod(t, 86400)
    hours, t = divmod(t, 3600)
    minutes, secs = divmod(t, 60)
    return (f"{days}-" if days >= 1 else "") + f"{hours:02d}:{minutes:02d}:{secs:02d}"


def kbytes2str(kbytes: float) -> str:
    """seff's kbytes2str: `%.2f %sB` in the largest power of 1024 below the figure."""
    if kbytes == 0:
        return "0.00 MB"
    exp = int(math.log(kbytes) / math.log(1024))
    units = "KMGTPE"
    unit = units[exp] if 0 <= exp < len(units) else ""
    return f"{kbytes / 1024 ** exp:.2f} {unit}B"


def _steps(rec: dict) -> list[tuple[dict, int]]:
    """Every step's figures that were measured, with its task count: the batch script's (one
    task) and rrun's steps'."""
    out = [(rec["usage"], 1)] if rec.get("usage") else []
    return out + [(s["usage"], int(s.get("ntasks") or s["usage"].get("tasks") or 1))
                  for s in rec.get("steps") or () if s.get("usage")]


def figures(rec: dict) -> dict:
    """What seff (22.05's) computes from the job's record, by seff's names: CPU the sum of the
    steps' TotalCPU; memory the largest task's RSS (TRESUsageInMax) of the step where it was
    largest, times that step's tasks."""
    ncpus = int(rec.get("cpus") or 0) or 1
    nnodes = int(rec.get("node_count") or 0) or 1
    sec = usec = 0
    mem, ntasks = 0.0, 0
    for u, tasks in _steps(rec):
        total = float(u.get("user_s") or 0) + float(u.get("system_s") or 0)
        sec += int(total)
        usec += round((total - int(total)) * 1_000_000)
        lmem = float(u.get("max_rss_kib") or 0)
        if mem < lmem:
            mem, ntasks = lmem, tasks
    if rec.get("mem_per_node"):
        reqmem, pernode = int(rec["mem_per_node"]) * 1024 * nnodes, True
    else:
        reqmem, pernode = int(rec.get("mem_per_cpu") or 0) * 1024 * ncpus, not rec.get(
            "mem_per_cpu")
    start, end = rec.get("start_time"), rec.get("end_time")
    walltime = int(max(0.0, end - start)) if start and end else 0
    if rec["state"] == "RUNNING" and start:
        import time

        walltime = int(max(0.0, time.time() - start))
    return {"ncpus": ncpus, "nnodes": nnodes, "ntasks": ntasks,
            "cput": sec + int(usec / 1_000_000 + 0.5), "mem": mem * ntasks, "reqmem": reqmem,
            "pernode": pernode, "walltime": walltime}


def group_name(gid: object) -> str:
    import grp

    try:
        return grp.getgrgid(int(gid)).gr_name  # type: ignore[call-overload]
    except (KeyError, TypeError, ValueError):
        return ""


def report(rec: dict, debug: bool = False) -> str:
    f = figures(rec)
    state = rec["state"]
    exit_status = int(rec.get("exit_code") or 0)
    user, group = rec.get("user") or "", group_name(rec.get("gid"))
    array = f"{rec['array_job_id']}_{rec['array_task_id']}" if rec.get("array_job_id") else ""
    lines = []
    if debug:
        lines += ["Slurm data: JobID ArrayJobID User Group State Clustername Ncpus Nnodes Ntasks "
                  "Reqmem PerNode Cput Walltime Mem ExitStatus",
                  f"Slurm data: {rec['job_id']} {array} {user} {group} {state} "
                  f"{rec.get('cluster') or ''} {f['ncpus']} {f['nnodes']} {f['ntasks']} "
                  f"{f['reqmem']} {int(f['pernode'])} {f['cput']} {f['walltime']} "
                  f"{_num(f['mem'])} {exit_status}", ""]
    lines.append(f"Job ID: {rec['job_id']}")
    if array:
        lines.append(f"Array Job ID: {array}")
    lines.append(f"Cluster: {rec.get('cluster') or ''}")
    lines.append(f"User/Group: {user}/{group}")
    if state in ("PENDING", "RUNNING"):
        lines.append(f"State: {state}")
    else:
        lines.append(f"State: {state} (exit code {exit_status})")
    if f["ncpus"] == 1:
        lines.append(f"Cores: {f['ncpus']}")
    else:
        lines.append(f"Nodes: {f['nnodes']}")
        lines.append(f"Cores per node: {f['ncpus'] // f['nnodes']}")
    if state == "PENDING":
        lines.append("Efficiency not available for jobs in the PENDING state.")
        return "\n".join(lines) + "\n"
    core = f["walltime"] * f["ncpus"]
    cpu_eff = f["cput"] / core * 100 if core else 0.0
    lines.append(f"CPU Utilized: {time2str(f['cput'])}")
    lines.append(f"CPU Efficiency: {cpu_eff:.2f}% of {time2str(core)} core-walltime")
    lines.append(f"Job Wall-clock time: {time2str(f['walltime'])}")
    one = f["ntasks"] == 1
    lines.append(f"Memory Utilized: {kbytes2str(f['mem'])}"
                 + ("" if one else " (estimated maximum)"))
    reqmem = f["reqmem"]
    mem_eff = f["mem"] / reqmem * 100 if reqmem else 0.0
    text = f"Memory Efficiency: {mem_eff:.2f}% of {kbytes2str(reqmem)}"
    if not one:
        share, per = ((reqmem / f["nnodes"], "node") if f["pernode"]
                      else (reqmem / f["ncpus"], "core"))
        text += f" ({kbytes2str(share)}/{per})"
    lines.append(text)
    lines += gpu_lines(rec.get("gpu_usage") or [])
    if state == "RUNNING":
        lines.append(f"WARNING: Efficiency statistics may be misleading for {state} jobs.")
    return "\n".join(lines) + "\n"


def _num(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def gpu_lines(gpus: list[dict]) -> list[str]:
    """Ranch's own lines (seff has none): how busy the job's GPUs were, and their memory."""
    sampled = [g for g in gpus if g.get("samples")]
    if not sampled:
        return []
    util = sum(float(g["util_ave"]) for g in sampled) / len(sampled)
    top = max(float(g["util_max"]) for g in sampled)
    mem = max(int(g["mem_max_mib"]) for g in sampled) * 1024
    total = max(int(g.get("mem_total_mib") or 0) for g in sampled) * 1024
    names = ", ".join(f"{g['node']}/{g['index']}" for g in sampled)
    lines = [f"GPUs: {len(sampled)} ({names})",
             f"GPU Utilization: {util:.2f}% (mean over the job's GPUs; highest sample "
             f"{top:.2f}%)",
             f"GPU Memory Utilized: {kbytes2str(mem)} of {kbytes2str(total)} per GPU "
             "(the most any of them held)"]
    if len(sampled) > 1:
        lines += [f"  {g['node']}/{g['index']}: {float(g['util_ave']):.2f}% busy, "
                  f"{kbytes2str(int(g['mem_max_mib']) * 1024)} memory" for g in sampled]
    return lines


def fetch(args, job: str) -> dict | None:
    from ranch.cli.controller import Refused, request

    head, _, task = job.partition("_")
    if not head.isdigit() or (task and not task.isdigit()):
        raise CliError(f"Invalid job id {job}")
    body: dict = {"job_ids": [] if task else [int(head)],
                  "tasks": [[int(head), int(task)]] if task else []}
    target = find_target(args.server, args.key_file, args.conf)
    try:
        reply = request(target, "GetAcct", body, want="AcctList")
    except Refused as exc:
        raise CliError(exc.message) from None
    for rec in reply.get("jobs") or ():
        if (task and rec.get("array_task_id") == int(task)) or (
                not task and (rec["job_id"] == int(head))):
            return rec
    # an array's id alone: seff reports its first task
    found = sorted((r for r in reply.get("jobs") or ()), key=lambda r: r["job_id"])
    return found[0] if found else None


def run(argv: list[str]) -> int:
    # seff's Getopt::Std answers --help and --version itself (exit 0); every Ranch command
    # says its version the one way (`ranch X.Y.Z`)
    if argv[:1] == ["--help"]:
        sys.stdout.write(usage())
        return 0
    if argv[:1] == ["--version"]:
        from ranch import __version__

        print(f"ranch {__version__} (seff Version {SEFF_VERSION})")
        return 0
    try:
        args, words = quickargs.getopt(OPTIONS, argv, exact=OWN)
    except quickargs.GetoptError as exc:
        raise CliError(str(exc)) from None
    if args.version:
        print(f"seff Version {SEFF_VERSION}")
        return 1
    if args.help or len(words) != 1:
        sys.stdout.write(usage())
        return 1
    rec = fetch(args, words[0])
    if rec is None:
        print("Job not found.", file=sys.stderr)
        return 2
    sys.stdout.write(report(rec, args.debug))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_main("rseff", run, argv)


if __name__ == "__main__":
    sys.exit(main())
