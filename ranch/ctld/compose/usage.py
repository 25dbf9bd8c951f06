"""What usage accrual (ctld/accounts/) is given by the composition root: its settings from the
config, and the running jobs read off the job store, so the accounts owner imports no jobs/."""

from __future__ import annotations

from ranch.assoc.usage import RunningJob, UsageSettings
from ranch.conf.model import ClusterConfig
from ranch.ctld.compose.jobs import JobSide

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
    for job in side.store.jobs.values():
        if job.start_time is None or not job.shares:
            continue
        if job.state in ACCRUING:
            end = float("inf")
        elif job.end_time is not None and job.end_time > since and job.state != "SUSPENDED":
            end = job.end_time
        else:
            continue
        until = (job.start_time + job.time_limit * 60 if job.time_limit is not None
                 else float("inf"))
        held = job.shares.values()
        tres = (("cpu", float(sum(s.cpus for s in held))), ("mem", float(sum(s.mem for s in held))),
                ("node", float(len(job.nodes))),
                ("gres/gpu", float(sum(len(s.gpus) for s in held))))
        out.append(RunningJob(job.req.user, job.req.account, job.partition, job.req.qos or
                              "normal", tres, job.start_time, end, weights.get(job.partition, ()),
                              until))
    return out


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
