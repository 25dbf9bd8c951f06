"""AccountingStorageEnforce=limits in the scheduling pass: what the jobs holding resources hold,
tallied per association and QOS and kept from pass to pass (a start counted as it is made, a job
no longer holding taken off at the next pass), and each pending job judged against its limits
by the pure check (ranch/assoc/limits.py)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import attrs

from ranch.assoc.limits import Ask, Rule, Tally, reason
from ranch.ctld.jobs.jobrecord import CONFIGURING, RUNNING, Job
from ranch.sched.model import Need

# (user, account, partition, QOS) -> the limits over such a job, None: no association
RuleOf = Callable[[str, str, str, str], "Rule | None"]
HOLDING = (CONFIGURING, RUNNING)  # slurmctld gives the usage back as a job ends (COMPLETING)
RECOUNT_S = 60.0  # a whole recount at least this often: nothing missed survives longer


def asked(need: Need, time_limit: int | None, asked_limit: int | None) -> Ask:
    """What a job of this need would hold (the nodes it asks for at least), under
    `time_limit` (minutes, None: UNLIMITED) of which it asked `asked_limit` itself."""
    if need.spread:
        cpus = need.tasks * need.cpus_per_task
        gpus = need.gpus_per_task * need.tasks if need.gpus_per_task else need.gpus * need.nodes
    else:
        cpus, gpus = need.cpus * need.nodes, need.gpus * need.nodes
    nodes = max(need.nodes, 1)
    return Ask(cpus=cpus, mem=need.mem * nodes, nodes=nodes, gpus=gpus,
               minutes=time_limit if asked_limit is not None else None, limit=time_limit)


def pending_ask(job: Job) -> Ask:
    """What the job would hold, from its request (the nodes it asks for at least)."""
    got = asked(job.need, job.time_limit, job.req.time_limit)
    nodes = max(got.nodes, len(job.req_nodes))
    if nodes == got.nodes:
        return got
    return attrs.evolve(got, nodes=nodes, mem=job.need.mem * nodes)


def held_ask(job: Job, now: float) -> Ask:
    """What an allocated job holds: its shares, node by node, until its time limit ends
    (from `now` if its start is not known yet)."""
    shares = job.shares.values()
    start = job.start_time if job.start_time is not None else now
    until = math.inf if job.time_limit is None else start + job.time_limit * 60
    return Ask(cpus=sum(s.cpus for s in shares), mem=sum(s.mem for s in shares),
               nodes=len(job.shares), gpus=sum(len(s.gpus) for s in shares),
               limit=job.time_limit, until=until)


class LimitScope:
    """The tally of the jobs holding resources under one tree (`rule_of`), since `built`."""

    def __init__(self, rule_of: RuleOf, jobs: Iterable[Job], built: float) -> None:
        self.rule_of = rule_of
        self.built = built
        self._rules: dict[tuple[str, str, str, str], Rule | None] = {}
        self._held: dict[int, tuple[Job, Rule, Ask]] = {}  # what each counted job added
        self.tally = Tally()
        for job in jobs:
            if job.state in HOLDING:
                self.started(job)

    def _rule(self, job: Job) -> Rule | None:
        req = job.req
        key = (req.user, req.account, job.partition, req.qos)
        try:
            return self._rules[key]
        except KeyError:
            got = self._rules[key] = self.rule_of(*key)
            return got

    def reason(self, job: Job, now: float) -> str:
        """The limit that holds the pending job at wall time `now`, "" if none (nor an
        association to judge)."""
        rule = self._rule(job)
        if rule is None:
            return ""
        return reason(rule, pending_ask(job), self.tally, job.req.user, job.req.account, now)

    def started(self, job: Job) -> None:
        """Count what an allocated job holds (one the pass started: before the next job)."""
        self._drop(job.id)  # a requeued job's earlier run, if the pass did not see it end
        rule = self._rule(job)
        if rule is not None:
            ask = held_ask(job, self.built)
            self.tally.add(rule, job.req.user, job.req.account, ask)
            self._held[job.id] = (job, rule, ask)

    def refresh(self) -> None:
        """Take off the jobs that hold nothing any more (ended, COMPLETING, requeued): a scan
        of the counted jobs' states, far cheaper than counting them all again."""
        gone = [jid for jid, (job, _, _) in self._held.items() if job.state not in HOLDING]
        for jid in gone:
            self._drop(jid)

    def _drop(self, job_id: int) -> None:
        got = self._held.pop(job_id, None)
        if got is not None:
            job, rule, ask = got
            self.tally.add(rule, job.req.user, job.req.account, ask, sign=-1)
