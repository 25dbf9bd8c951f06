"""Which jobs rqueue lists (-j ids, -w node names) and how array tasks fold (12_[3-4%2])."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import SimpleNamespace as Namespace


def wanted_id(job: dict, text: str) -> bool:
    """squeue -j: `ID` (a job, or every task of array ID) or `ID_TASK`, read as strtol does."""
    from ranch.cli.squeue_options import _strtol

    for word in (w for w in text.split(",") if w):
        job_id, tail = _strtol(word)
        task = _strtol(tail[1:])[0] if tail.startswith("_") else None
        if task is None and job_id in (job["job_id"], job.get("array_job_id")):
            return True
        if task is not None and job.get("array_job_id") == job_id and str(
                job.get("array_task_id")) == str(task):
            return True
    return False


def collapse(jobs: list[dict]) -> list[dict]:
    """squeue without -r: an array's tasks still pending (with one reason) are one line,
    `12_[2-5,7]`, as slurmctld holds them in one record until each starts."""
    groups: dict[tuple, list[dict]] = {}
    for j in jobs:
        if j.get("array_job_id") and j["state"] == "PENDING":
            groups.setdefault((j["array_job_id"], j.get("reason")), []).append(j)
    if not any(len(g) > 1 for g in groups.values()):
        return jobs
    out: list[dict] = []
    done: set[tuple] = set()
    for j in jobs:
        key = (j.get("array_job_id"), j.get("reason"))
        group = groups.get(key) if j["state"] == "PENDING" else None
        if not group or len(group) == 1:
            out.append(j)
            continue
        if key in done:
            continue
        done.add(key)
        spec = _ranges(sorted(g["array_task_id"] for g in group))  # "1-3,5"
        if group[0].get("array_throttle"):  # --array=...%N: squeue shows the throttle
            spec += f"%{group[0]['array_throttle']}"
        # %i `12_[1-3,5%2]`, %K `1-3,5%2`
        out.append({**group[0], "array_task_id": f"[{spec}]", "array_tasks": spec})
    return out


def _ranges(tasks: list[int]) -> str:
    """Task ids as squeue writes an array's pending ones: runs of two or more as `3-4`."""
    out: list[str] = []
    start = prev = tasks[0]
    for t in [*tasks[1:], None]:
        if t is not None and t == prev + 1:
            prev = t
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if t is not None:
            start = prev = t
    return ",".join(out)


def unknown(args: Namespace, jobs: list[dict]) -> bool:
    """squeue -j ID of one job asks slurmctld for that job alone: one it does not hold (never
    submitted, or gone past MinJobAge) is an error. Several ids are looked for in the list."""
    from ranch.cli.squeue_options import _strtol

    words = [w for w in (args.jobs or "").split(",") if w]
    if len(words) != 1 or args.steps is not None or args.json:
        return False
    job_id = _strtol(words[0])[0]
    return not any(job_id in (j["job_id"], j.get("array_job_id")) for j in jobs)


def known_nodes(target, text: str) -> str:
    """squeue -w: each name must be a node of the cluster (or `localhost`, this host)."""
    import os

    from ranch.cli.controller import CliError, fetch_snapshot
    from ranch.conf.hostlist import HostlistError, expand

    try:
        names = expand(text) if text.strip() else []
    except HostlistError:
        raise CliError(f"'{text}' invalid entry for --nodelist") from None
    known = {n.get("name") for n in fetch_snapshot(target, ("name",)).nodes}
    for name in names:
        if name not in known and not (name.lower() == "localhost" and os.uname().nodename.split(
                ".")[0] in known):
            raise CliError(f"Invalid node name {name}")
    return text
