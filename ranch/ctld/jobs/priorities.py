"""priority/multifactor's owner: each pending job's factors and priority (sched/priority.py),
set at submission and again every PriorityCalcPeriod, and the queue's order (PriorityTier first);
what rsprio shows. Under priority/basic it leaves everything as it was."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

import attrs
import trio
import trio.lowlevel

from ranch.assoc import enforce, fairshare
from ranch.assoc.records import PRIORITY
from ranch.ctld import logs
from ranch.ctld.rights import DENIED, Identity, may_act_on
from ranch.protocol import messages as m
from ranch.sched import priority as prio
from ranch.statemachine.jobstates import PENDING, RUNNING

if TYPE_CHECKING:
    from ranch.assoc.db import AcctDb
    from ranch.assoc.records import Assoc
    from ranch.conf.model import ClusterConfig
    from ranch.ctld.jobs.jobrecord import Job
    from ranch.ctld.jobs.settings import JobSettings
    from ranch.ctld.jobs.store import JobStore

# the accounting tree and its usage by association id (None: accounting is off)
Tree = Callable[[], "tuple[AcctDb, Mapping[int, float]] | None"]


@attrs.frozen
class _Given:
    """A JobSettings holding a candidate config (what `under` reads of one)."""

    config: ClusterConfig


def assoc_priority(db: AcctDb, assoc: Assoc) -> int:
    """An association's Priority as slurmctld holds it: its own, else the nearest ancestor's
    (slurmdbd fills it in), none (INFINITE) counting as 0."""
    value = db.effective(assoc, PRIORITY)
    return int(value) if value else 0


def basic_order(job: Job) -> tuple[int, int]:
    """priority/basic's queue (the store's own): highest priority first, then the older job."""
    return (-job.priority, job.id)


class Priorities:
    """The multifactor plugin's state on the job side: the settings in force, each job's last
    factors (what rsprio shows, as slurmctld keeps prio_factors), the figures they normalise by."""

    def __init__(self, store: JobStore, settings: JobSettings, *, wall: Callable[[], float],
                 tree: Tree, apply: bool = True) -> None:
        """`apply` False: only compute under the settings' config (`under`'s own copy), never
        setting a job's priority or the queue's order."""
        self._store = store
        self._settings = settings
        self._wall = wall
        self._tree = tree
        self.factors: dict[int, prio.Factors] = {}
        self._fs: dict[int, float] = {}
        self._fs_key: Any = None
        self._maxima: tuple[Any, int, int] = (None, 0, 0)  # (tree, QOS, association maxima)
        self._who: dict[tuple[str, str, str, str], tuple[int, float, int]] = {}
        if apply:
            self.use_config()
        else:
            self._read(settings.config)

    # -- the config ---------------------------------------------------------------------------

    @property
    def on(self) -> bool:
        """PriorityType=priority/multifactor in the config in force."""
        return self._settings.config.priority.multifactor

    def use_config(self) -> None:
        """Read the config in force (at start and each reconfigure), then recompute."""
        self._read(self._settings.config)
        if self.on:
            self._store.reorder(self.order, self.prioritize)
            self.recompute()
        else:
            self.factors.clear()
            self._store.reorder(basic_order)

    def _read(self, config: ClusterConfig) -> None:
        self._maxima = (None, 0, 0)
        self.prio = prio.settings_of(config)
        self._parts = prio.partitions_of(config)
        base = prio.cluster_of(config, self._parts)
        self._cluster = (base.nodes, base.cpus, base.part_max)

    def under(self, config: ClusterConfig) -> Callable[[Job], tuple[int, tuple]]:
        """Each job's (priority, place in the queue) were `config` in force, as use_config's
        recompute would set them (a reconfigure's dry run, ctld/jobs/dryrun.py): this owner's
        own computation on a copy given the candidate, its state and the jobs untouched. Under
        priority/basic the priorities stay as they are (a reconfigure recomputes none)."""
        shadow = Priorities(self._store, cast(Any, _Given(config)), wall=self._wall,
                            tree=self._tree, apply=False)  # the store only read
        if not shadow.on:
            return lambda job: (job.priority, basic_order(job))
        tree = shadow._tree()
        shadow._fair_share(tree)
        norms, now = shadow._normalisers(tree), self._wall()

        def of(job: Job) -> tuple[int, tuple]:
            value = job.priority
            if job.state == PENDING and not job.direct_prio:
                value = prio.total(prio.factors(shadow.inputs(job, tree, now), shadow.prio,
                                                norms, now))
            tier = shadow._parts.get(job.partition, prio.NO_PART)[1]
            return value, prio.order_key(tier, value, job.submit_time, job.id)
        return of

    # -- computing ----------------------------------------------------------------------------

    def order(self, job: Job) -> tuple[int, int, float, int]:
        """Slurm's order: partition PriorityTier, then priority, then submit time, then id."""
        tier = self._parts.get(job.partition, prio.NO_PART)[1]
        return prio.order_key(tier, job.priority, job.submit_time, job.id)

    def prioritize(self, job: Job) -> None:
        """One job's priority now (a new job, or its nice changed); an admin's stays."""
        if not self.on or job.direct_prio:
            return
        tree = self._tree()
        self._fair_share(tree)
        self._who.clear()
        self._set(job, tree, self._normalisers(tree), self._wall())

    def recompute(self) -> None:
        """Every pending job's priority afresh (the decay thread's
        decay_apply_weighted_factors), then the queue re-sorted."""
        for _ in self._recomputing(len(self._store.pending) + 1):
            pass

    def _recomputing(self, chunk: int) -> Iterator[None]:
        """recompute, yielding after every `chunk` jobs (run's loop lets others run there: a
        job changed meanwhile is read as it is then)."""
        if not self.on:
            return
        tree = self._tree()
        self._fair_share(tree)
        self._who.clear()  # each (user, account, partition, QOS) looked up once a recompute
        norms, now = self._normalisers(tree), self._wall()
        for n, job in enumerate(self._calculated(), 1):
            if job.state in self._states and not job.direct_prio:
                self._set(job, tree, norms, now, periodic=True)
            if n % chunk == 0:
                yield
        live = {j.id for j in self._calculated()}
        for gone in [j for j in self.factors if j not in live]:
            del self.factors[gone]
        self._store.reorder(self.order, self.prioritize)

    async def run(self) -> None:
        """Forever: now (the restored jobs), then every PriorityCalcPeriod (read again each
        time), recompute, 1,000 jobs between checkpoints (10,000 pending: ~10 ms each)."""
        while True:
            if self.on:
                for _ in self._recomputing(1000):
                    await trio.lowlevel.checkpoint()
                self._store.kick()
            await trio.sleep(self._settings.config.accounting.calc_period)

    def _normalisers(self, tree: tuple[AcctDb, Mapping[int, float]] | None
                     ) -> prio.Cluster:
        nodes, cpus, part_max = self._cluster
        if tree is None:
            return prio.Cluster(nodes, cpus, part_max)
        db = tree[0]
        if self._maxima[0] is not db:  # a tree never changes: read once per tree
            cluster = self._settings.config.cluster_name
            # g_assoc_max_priority: the highest of this cluster's associations (the highest
            # own value is the highest inherited one too)
            self._maxima = (db, prio.highest(q.priority for q in db.qos), prio.highest(
                int(a.limit(PRIORITY) or 0) for a in db.assocs if a.cluster == cluster))
        _, qos_max, assoc_max = self._maxima
        return prio.Cluster(nodes, cpus, part_max, qos_max, assoc_max)

    def _fair_share(self, tree: tuple[AcctDb, Mapping[int, float]] | None) -> None:
        """The fair-share factors, computed again only when the tree or its usage changed."""
        if tree is None or not self.prio.weights.fairshare:
            self._fs, self._fs_key = {}, None
            return
        key = (id(tree[0]), id(tree[1]), self.prio.flags)
        if key != self._fs_key:
            cluster = self._settings.config.cluster_name
            self._fs = fairshare.factors(tree[0], cluster, tree[1], flags=self.prio.flags,
                                         damp=self.prio.damp)
            self._fs_key = key

    @property
    def _states(self) -> tuple[str, ...]:
        """The states whose priority is recomputed: pending, and running under
        PriorityFlags=CALCULATE_RUNNING (decay_apply_weighted_factors)."""
        return (PENDING, RUNNING) if self.prio.has("CALCULATE_RUNNING") else (PENDING,)

    def _calculated(self) -> list[Job]:
        """The jobs a recompute visits: the pending queue, and the running jobs under
        CALCULATE_RUNNING."""
        jobs = list(self._store.pending)
        if self.prio.has("CALCULATE_RUNNING"):
            jobs += [j for j in self._store.jobs.values() if j.state == RUNNING]
        return jobs

    def _set(self, job: Job, tree: tuple[AcctDb, Mapping[int, float]] | None,
             norms: prio.Cluster, now: float, periodic: bool = False) -> None:
        """The factors and priority of `job` now; the calc period's recompute (`periodic`)
        only raises it under PriorityFlags=INCR_ONLY (its factors are new all the same)."""
        f = prio.factors(self.inputs(job, tree, now), self.prio, norms, now)
        self.factors[job.id] = f
        new = prio.total(f)
        if periodic and self.prio.has("INCR_ONLY") and new < job.priority:
            return
        if new != job.priority:  # recomputed, not kept: no journal write waits on it
            job.priority = new
            self._store.touch(job, durable=False)

    def inputs(self, job: Job, tree: tuple[AcctDb, Mapping[int, float]] | None,
               now: float) -> prio.JobInput:
        """What the factors read of `job`."""
        req, need = job.req, job.need
        factor, _, max_time, totals = self._parts.get(job.partition, prio.NO_PART)
        cpus = need.tasks * need.cpus_per_task if need.spread else need.cpus * need.nodes
        # the nodes asked (-N; 1 without it), as slurmctld's details->min_nodes: not the
        # nodes a spread -n needs at least
        nodes = max(req.num_nodes, 1) if need.spread else need.nodes
        qos_priority, fairshare, assoc_prio = 0, 0.0, 0
        if tree is not None:
            key = (req.user, req.account, job.partition, req.qos)
            got = self._who.get(key)
            if got is None:
                got = self._who[key] = self._assoc_figures(tree[0], *key)
            qos_priority, fairshare, assoc_prio = got
        eligible = not job.held and not job.reason.startswith("Dependency")
        begin = req.begin_time or 0.0
        accrue = max(job.submit_time, begin) if eligible and begin <= now else None
        if self.prio.has("ACCRUE_ALWAYS"):  # age from submission, held or waiting or not
            accrue = job.submit_time
        tres = (("cpu", float(cpus)), ("mem", float(need.mem * need.nodes)),
                ("node", float(nodes)), ("gres/gpu", float(need.gpus * need.nodes)))
        return prio.JobInput(
            accrue=accrue, min_nodes=nodes, cpus=cpus, time_limit=job.time_limit,
            part_max_time=max_time, part_factor=factor, qos_priority=qos_priority,
            assoc_priority=assoc_prio, fairshare=fairshare, tres=tres, part_tres=totals,
            nice=req.nice, site=job.site_factor)

    def _assoc_figures(self, db: AcctDb, user: str, account: str, partition: str, qos: str
                       ) -> tuple[int, float, int]:
        """(its QOS's Priority, its association's fair-share factor, its association's
        Priority); the default account and QOS filled in as slurmctld does."""
        if not account and (known := db.user(user)) is not None:
            account = known.default_account
        cluster = self._settings.config.cluster_name
        assoc = enforce.association(db, cluster, user, account, partition)
        q = db.qos_named(qos or (enforce.default_qos(db, assoc) if assoc else "normal"))
        if assoc is None:
            return (q.priority if q is not None else 0, 0.0, 0)
        return (q.priority if q is not None else 0, self._fs.get(assoc.id, 0.0),
                assoc_priority(db, assoc))

    # -- rsprio ---------------------------------------------------------------------------------

    def reply(self, req: m.PriorityRequest, actor: Identity | None = None) -> m.PriorityReply:
        """sprio's rows: each pending job not held and eligible (begin time past), filtered
        by job ids, users and partitions as asked; PrivateData=jobs leaves a user who is not
        an admin their own."""
        config = self._settings.config
        p = self.prio.weights
        weights = m.PriorityWeights(p.age, p.assoc, p.fairshare, p.jobsize, p.partition, p.qos,
                                    dict(config.settings).get("PriorityWeightTRES", ""))
        if not self.on:
            return m.PriorityReply(False, weights)
        private = "jobs" in config.access.private_data and actor is not None and not actor.admin
        now = self._wall()
        rows = []
        for job in sorted(self._calculated(), key=lambda j: j.id):
            # not yet eligible: begun later (submitted later under ACCRUE_ALWAYS)
            eligible = job.submit_time if self.prio.has("ACCRUE_ALWAYS") else (
                job.req.begin_time or 0)
            if job.state not in self._states or job.held or eligible > now:
                continue
            if (req.jobs and job.id not in req.jobs) or (
                    req.users and job.req.user not in req.users) or (
                    req.partitions and job.partition not in req.partitions):
                continue
            if private and actor is not None and not may_act_on(actor, job.req.uid,
                                                                 job.req.user):
                continue
            # an admin's Priority=: only that (_filter_job copies no factors of such a job)
            f = prio.Factors() if job.direct_prio else self.factors.get(job.id, prio.Factors())
            rows.append(m.PriorityRow(
                job.id, job.partition, job.req.user, job.priority if job.direct_prio else 0,
                f.age, f.assoc, f.fairshare, f.jobsize, f.partition, f.qos, f.tres, f.nice,
                f.site, f.tres_norm))
        return m.PriorityReply(True, weights, tuple(rows))

    # -- rcontrol top ---------------------------------------------------------------------------

    def top(self, ids: tuple[int, ...], actor: Identity) -> m.JobResult:
        """scontrol top: the jobs named move above the same user's other pending jobs of
        their partition, account and QOS, by nice (job_mgr.c job_set_top); an operator's
        command unless SchedulerParameters=enable_user_top."""
        if not actor.admin and not self._settings.config.priority.user_top:
            return m.JobResult(False, errors=(DENIED,))
        chosen: list[Job] = []
        errors: list[str] = []
        for jid in dict.fromkeys(ids):
            job = self._store.jobs.get(jid)
            if job is None:
                return m.JobResult(False, errors=("Invalid job id specified",))
            if not actor.admin and job.req.uid != actor.uid:
                return m.JobResult(False, errors=(DENIED,))
            if job.state != PENDING:
                errors.append("Job is no longer pending execution")
            elif job.held:
                errors.append("Job is in held state, pending scheduler release")
            else:
                chosen.append(job)
        if not chosen:  # _set_top: the last such refusal, only when no job is left to move
            return m.JobResult(False, errors=tuple(errors[-1:]))
        first = chosen[0]
        key = (first.req.user, first.req.account, first.partition, first.req.qos)
        others = [j for j in self._store.pending if j.state == PENDING and j not in chosen
                  and not j.held and j.priority > 1
                  and (j.req.user, j.req.account, j.partition, j.req.qos) == key]
        moved = prio.top([(j.id, j.priority, j.req.nice) for j in chosen],
                         [(j.id, j.priority, j.req.nice) for j in others])
        for jid, (priority, nice) in moved.items():
            job = self._store.jobs[jid]
            job.priority = priority
            job.req = attrs.evolve(job.req, nice=nice)  # the factors (rsprio) keep theirs until
            self._store.touch(job)  # the next recompute, as slurmctld's prio_factors do
        if self.on:
            self._store.reorder(self.order, self.prioritize)
        else:
            self._store.reorder(basic_order)
        self._store.kick()
        logs.event("job top", jobs=",".join(str(j.id) for j in chosen), user=actor.name)
        return m.JobResult(True, tuple(j.id for j in chosen))
