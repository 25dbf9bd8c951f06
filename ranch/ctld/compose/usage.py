"""What usage accrual (ctld/accounts/) is given by the composition root: its settings from the
config, and the running jobs read off the job store, so the accounts owner imports no jobs/."""

from __future__ import annotations

from ranch.assoc.usage import RunningJob, UsageSettings
from ranch.conf.model import ClusterConfig
from ranch.ctld.compose.jobs import JobSide
from ranch.ctld.jobs.jobrecord import Job

ACCRUING = ("RUNNING", "CONFIGURING", "COMPLETING")


def settings_of(config: ClusterConfig) -> UsageSettings:
    a = config.accounting
    return UsageSettings(half_life=a.half_life, calc_period=a.calc_period, reset=a.reset_period,
                         max_tres="MAX_TRES" in config.priority.flags)


def running_jobs(side: JobSide, since: float) -> list[RunningJob]:
    """Every job running, or that ran after `since` (the last calc period: its last part is
    charged up to its end, as Slurm's), with its TRES (cpu, mem MB, node, gres/gpu) summed
    over its nodes and its partition's TRESBillingWeights."""
    config = side.settings.config
    weights = {p.name: p.billing for p in config.partitions}
    out = []
    nodes = {n.name: n.cpus for n in config.nodes}
    # slurmctld charges a job's last part at its end (priority_p_job_end) only when it keeps
    # limits (acct_policy.c _adjust_limit_usage): otherwise only the calc periods it ran through
    at_end = bool({"limits", "safe"} & set(config.accounting.enforce))
    for job in side.store.jobs.values():
        if job.start_time is None:
            continue
        if job.state in ACCRUING and job.shares:
            end = float("inf")
        elif (job.end_time is not None and job.end_time > since and job.state != "SUSPENDED"
              and (job.shares or at_end)):
            end = job.end_time
        else:
            continue
        until = (job.start_time + job.time_limit * 60 if job.time_limit is not None
                 else float("inf"))
        tres = _tres(job, nodes)
        out.append(RunningJob(job.req.user, job.req.account, job.partition, job.req.qos or
                              "normal", tres, job.start_time, end, weights.get(job.partition, ()),
                              until))
    return out


def _tres(job: Job, nodes: dict[str, int]) -> tuple[tuple[str, float], ...]:
    """What the job holds (cpu, mem MB, node, gres/gpu); once it ended and let go of its
    nodes, what it held (an exclusive job every CPU of its nodes, any other what it asked)."""
    held = job.shares.values()
    if held:
        return (("cpu", float(sum(s.cpus for s in held))),
                ("mem", float(sum(s.mem for s in held))), ("node", float(len(job.nodes))),
                ("gres/gpu", float(sum(len(s.gpus) for s in held))))
    need = job.need
    if job.req.exclusive and job.nodes:
        cpus = sum(nodes.get(n, 0) for n in job.nodes)
    else:
        cpus = job.req.ntasks * job.req.cpus_per_task if need.spread else need.cpus * need.nodes
    count = len(job.nodes) or need.nodes
    return (("cpu", float(cpus)), ("mem", float(need.mem * count)), ("node", float(count)),
            ("gres/gpu", float(need.gpus * count)))


def history_jobs(records: list[dict], config: ClusterConfig) -> list[RunningJob]:
    """The job history's records (ctld/jobs/acct.py keeps these keys) as finished runs."""
    weights = {p.name: p.billing for p in config.partitions}
    out = []
    for r in records:
        start, end = r.get("start_time"), r.get("end_time")
        if not isinstance(start, int | float) or not isinstance(end, int | float):
            continue
        nodes = int(r.get("node_count") or 0)
        tres = (("cpu", float(r.get("cpus") or 0)),
                ("mem", float((r.get("mem_per_node") or 0) * nodes)), ("node", float(nodes)),
                ("gres/gpu", float((r.get("gpus_per_node") or 0) * nodes)))
        part = str(r.get("partition") or "")
        out.append(RunningJob(str(r.get("user") or ""), str(r.get("account") or ""), part,
                              str(r.get("qos") or "normal"), tres, float(start), float(end),
                              weights.get(part, ())))
    return out
