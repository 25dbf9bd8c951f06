"""priority/multifactor in the simulator: the controller's own factors and order
(ranch/sched/priority.py), fair share (ranch/assoc/fairshare.py) over the trace's accounts with
usage accruing and decaying in virtual time (ranch/assoc/usage.py), recomputed every
PriorityCalcPeriod as ranch/ctld/jobs/priorities.py does."""

from __future__ import annotations

from collections.abc import Sequence

from ranch.assoc import enforce, fairshare, ops
from ranch.assoc.db import AcctDb
from ranch.assoc.usage import RunningJob, Usage, UsageSettings, accrue
from ranch.conf.model import ClusterConfig
from ranch.sched import priority as prio
from ranch.sim.engine import Order, Run
from ranch.sim.trace import TraceJob

# virtual time 0 read as this wall time: the factors take an accrue time of 0 as "not
# eligible" and usage a last decay of 0 as "never ran", as the controller's epoch never is
EPOCH = 1_000_000_000.0


def user_of(job: TraceJob) -> str:
    return job.user or f"u{job.uid}"


def account_of(job: TraceJob) -> str:
    return job.account or "root"


def accounts_tree(jobs: Sequence[TraceJob], cluster: str) -> AcctDb:
    """The trace's accounts, each under root with one share, each user under the accounts its
    jobs name (a job without an account: root's), QOS normal: what sacctmgr would be told."""
    db = AcctDb.fresh().add_cluster(cluster)
    names = sorted({account_of(j) for j in jobs} - {"root"})
    if names:
        db = ops.add_accounts(db, tuple(names)).db
    by_account: dict[str, set[str]] = {}
    for j in jobs:
        by_account.setdefault(account_of(j), set()).add(user_of(j))
    for account, users in sorted(by_account.items()):
        new = tuple(sorted(u for u in users if db.find_assoc(cluster, account, u, "") is None))
        if new:
            db = ops.add_users(db, new, (account,)).db
    return db


class Multifactor(Order):
    """The queue as the controller orders it under PriorityType=priority/multifactor: a job's
    priority set when it is submitted and again every PriorityCalcPeriod, PriorityTier first."""

    def __init__(self, cfg: ClusterConfig, jobs: Sequence[TraceJob]) -> None:
        super().__init__()
        self.settings = prio.settings_of(cfg)
        self.parts = prio.partitions_of(cfg)
        self.default = next((p.name for p in cfg.partitions if p.default),
                            cfg.partitions[0].name if cfg.partitions else "")
        a = cfg.accounting
        self.usage_settings = UsageSettings(half_life=a.half_life, calc_period=a.calc_period,
                                            reset=a.reset_period)
        self.period = float(a.calc_period)
        self.cluster = cfg.cluster_name
        self.db = accounts_tree(jobs, self.cluster)
        self.usage = Usage()
        self.fs: dict[int, float] = {}
        self.norms = prio.cluster_of(cfg, self.parts,
                                     prio.highest(q.priority for q in self.db.qos))
        self.values: dict[int, int] = {}
        self.factors: dict[int, prio.Factors] = {}
        self.pending: dict[int, TraceJob] = {}

    def _part(self, job: TraceJob) -> prio.PartFigures:
        return self.parts.get(job.partition or self.default, prio.NO_PART)

    def inputs(self, job: TraceJob) -> prio.JobInput:
        """What the factors read of a trace job: eligible from its submission (a trace has no
        holds, dependencies or begin times), its nodes and CPUs, its association's fair share;
        no QOS priority (a trace names no QOS: all run under normal) and no memory."""
        factor, _, max_time, totals = self._part(job)
        nodes = job.nodes or 1
        cpus = job.nodes * job.cpus_per_node if job.nodes and job.cpus_per_node else job.procs
        assoc = enforce.association(self.db, self.cluster, user_of(job), account_of(job),
                                    job.partition)
        fs = self.fs.get(assoc.id, 0.0) if assoc is not None else 0.0
        tres = (("cpu", float(cpus)), ("mem", 0.0), ("node", float(nodes)), ("gres/gpu", 0.0))
        return prio.JobInput(
            accrue=EPOCH + job.submit, min_nodes=nodes, cpus=cpus, time_limit=job.time_limit,
            part_max_time=max_time, part_factor=factor, fairshare=fs, tres=tres,
            part_tres=totals, nice=job.nice)

    def _set(self, job: TraceJob, now: float) -> None:
        f = prio.factors(self.inputs(job), self.settings, self.norms, EPOCH + now)
        self.factors[job.id] = f
        self.values[job.id] = prio.total(f)

    def submitted(self, job: TraceJob, now: float) -> None:
        self.pending[job.id] = job
        self._set(job, now)

    def priority(self, job: TraceJob, now: float) -> int:
        return self.values[job.id]

    def key(self, job: TraceJob, priority: int) -> tuple:
        return prio.order_key(self._part(job)[1], priority, job.submit, job.id)

    def tick(self, now: float, running: Sequence[Run], ended: Sequence[Run]) -> None:
        """A calc period: usage decays and the runs since the last add theirs (as the
        controller's accounts owner), then fair share and every pending job's priority anew."""
        jobs = []
        for run in [*running, *ended]:
            if run.start is None:
                continue
            job = run.job
            end = EPOCH + run.end if run.end is not None else float("inf")
            jobs.append(RunningJob(
                user_of(job), account_of(job), run.partition, "normal",
                (("cpu", float(run.cpus)), ("node", float(run.nodes))), EPOCH + run.start, end))
            self.pending.pop(job.id, None)
        self.usage = accrue(self.usage, self.db, self.cluster, self.usage_settings, jobs,
                            EPOCH + now)
        if self.settings.weights.fairshare:
            self.fs = fairshare.factors(self.db, self.cluster, self.usage.assocs,
                                        flags=self.settings.flags, damp=self.settings.damp)
        for job in self.pending.values():
            self._set(job, now)


def order_for(cfg: ClusterConfig, jobs: Sequence[TraceJob]) -> Order:
    """The queue's order the config asks for: multifactor's, or priority/basic's."""
    return Multifactor(cfg, jobs) if cfg.priority.multifactor else Order()
