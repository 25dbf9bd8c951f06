"""The job side built: the job store and each of its components side by side, each given the few
things it uses (a narrow port of ctld/jobs/ports.py, or plain callables and values). What one
component does on another's behalf is a closure over the other, built later in this function."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ranch.ctld.jobs import inactive as allocations
from ranch.ctld.jobs.acct import Accounting
from ranch.ctld.jobs.backfill import Backfill
from ranch.ctld.jobs.decisions import Decisions, Record
from ranch.ctld.jobs.dependbook import Dependencies
from ranch.ctld.jobs.dryrun import DryRuns
from ranch.ctld.jobs.inactive import InactiveWatch
from ranch.ctld.jobs.jobcommands import JobCommands
from ranch.ctld.jobs.joblisting import JobListing
from ranch.ctld.jobs.jobreconcile import JobReconciliation, Run
from ranch.ctld.jobs.jobrecord import BEGIN_KEY
from ranch.ctld.jobs.jobstart import JobStarts
from ranch.ctld.jobs.jobsubmit import JobSubmission
from ranch.ctld.jobs.jobupdate import LIMIT_KIND, JobUpdate, RunLimits
from ranch.ctld.jobs.launches import Launcher
from ranch.ctld.jobs.limitpass import RuleOf
from ranch.ctld.jobs.mail import Mail
from ranch.ctld.jobs.ports import StoreEvents
from ranch.ctld.jobs.preemption import EXEMPT_KIND, GRACE_KIND, Preemptions
from ranch.ctld.jobs.priorities import Priorities, Tree
from ranch.ctld.jobs.schedstats import SchedStats
from ranch.ctld.jobs.settings import JobSettings
from ranch.ctld.jobs.steps import JobSteps
from ranch.ctld.jobs.store import JobStore
from ranch.ctld.jobs.why import WhyDesk
from ranch.ctld.jobs.willrun import WillRun

if TYPE_CHECKING:
    from ranch.assoc.records import Qos
    from ranch.conf.model import ClusterConfig
    from ranch.ctld.deadlines import Deadlines
    from ranch.ctld.jobs.history import FileHistory
    from ranch.ctld.jobs.jobrecord import Job
    from ranch.ctld.jobs.ports import Admit, NodesForJobs, NodeView
    from ranch.ctld.site import Site
    from ranch.ctld.state.changelog import ChangeLog
    from ranch.protocol import messages as m
    from ranch.sched.model import Window


@attrs.frozen
class JobSide:
    """The job store and its components, and what the node side calls on the job side
    (nodes/ports.py JobsForNodes) as callables of the component that does the work."""

    store: JobStore  # the jobs, the queue, what each node holds; journal records, state file
    settings: JobSettings
    submission: JobSubmission  # rbatch, ralloc, rrun: submit, or build/accept/retract
    starts: JobStarts  # the scheduling pass (run)
    launcher: Launcher  # LaunchJob, and the runs a node has not named yet
    reconciliation: JobReconciliation  # what nodes report
    commands: JobCommands  # rcancel, rcontrol's job commands
    updates: JobUpdate  # rcontrol update JobId=
    listing: JobListing  # records, JobList bodies
    steps: JobSteps  # rrun's steps: request, node_ended
    inactive: InactiveWatch  # the deadline kinds "inactive", "orphan"
    limits: RunLimits  # the deadline kind "limit"
    dependencies: Dependencies
    mail: Mail
    accounting: Accounting  # racct: query, and the history's writer task (keep)
    will_run: WillRun  # sbatch --test-only: answer
    backfill: Backfill  # sched/backfill's loop (run: a task of the daemon's nursery)
    priorities: Priorities  # priority/multifactor (run: a task of the daemon's nursery)
    sched_stats: SchedStats  # what both schedulers count of their cycles (rdiag, /metrics)
    why: WhyDesk  # rqueue --why, /api/v1/jobs/{id}/why (issue 44)
    dry_runs: DryRuns  # rcontrol reconfigure --dry-run (issue 44)
    history: FileHistory | None
    # what the node side calls (the contract of issue 42: nodes/ports.py JobsForNodes)
    kick: Callable[[], None]
    node_lost: Callable[..., None]  # (node, requeue, wait=False)
    heartbeat: Callable[[NodeView, m.Heartbeat], tuple[tuple[int, ...], tuple[Run, ...]]]
    registered: Callable[[NodeView, m.Register], tuple[tuple[int, ...], tuple[Run, ...]]]
    started: Callable[[NodeView, m.JobStarted], m.Ack]
    jobs_holding: Callable[[Sequence[str]], list[tuple[int, list[str]]]]
    jobs_running_until: Callable[[], dict[str, float]]
    config_changed: Callable[[ClusterConfig], None]
    preemptions: Preemptions  # preempt/qos; the deadline kind "preempt grace"


class RegistryDoors(Protocol):
    """What the job side reads and calls of the node registry (the rest of NodesForJobs: the
    reservations' windows, given apart)."""

    @property
    def nodes(self) -> Mapping[str, NodeView]: ...
    @property
    def members_gen(self) -> int: ...

    def partition_nodes(self, name: str) -> list[str] | None: ...
    def set_use(self, name: str, cpus: int, mem: int, gpus: tuple[int, ...],
                completing: bool) -> None: ...
    def push(self, name: str, msg: Any) -> bool: ...
    def apply_event(self, node: Any, event: Any) -> tuple[bool, str | None]: ...


@attrs.frozen
class NodesOf:
    """The node side as the job side reads it (ctld/jobs/ports.py NodesForJobs): the registry's
    doors, and the reservations' `blocked` (built after the job side: a closure)."""

    _registry: RegistryDoors
    partition_nodes: Callable[[str], list[str] | None]
    set_use: Callable[[str, int, int, tuple[int, ...], bool], None]
    push: Callable[[str, Any], bool]
    apply_event: Callable[[Any, Any], tuple[bool, str | None]]
    blocked: Callable[[float | None, float], frozenset[str]]

    @property
    def nodes(self) -> Mapping[str, NodeView]:  # replaced by a reconfigure: read it each time
        return self._registry.nodes

    @property
    def members_gen(self) -> int:
        return self._registry.members_gen


def nodes_of(registry: RegistryDoors,
             blocked: Callable[[float | None, float], frozenset[str]]) -> NodesOf:
    return NodesOf(registry, registry.partition_nodes, registry.set_use, registry.push,
                   registry.apply_event, blocked)


def on_deadline(side: JobSide, name: Any, kind: str) -> bool:
    """The deadline dispatcher's share for the job side: a job's deadline came (True), or the
    key is none of the job side's (False)."""
    if kind == BEGIN_KEY[1]:  # a pending job's BeginTime (or after:ID+MIN) came
        side.kick()
    elif kind == allocations.KIND:  # an allocation's command went silent
        side.inactive.fired(name)
    elif kind == allocations.ORPHAN:  # rrun's step ended and rrun did not release it
        side.inactive.orphaned(name)
    elif kind == LIMIT_KIND:  # a running job's lowered time limit
        side.limits.fired(name)
    elif kind == GRACE_KIND:  # a preempted job's GraceTime is over
        side.preemptions.fired(name)
    elif kind == EXEMPT_KIND:  # a job left its PreemptExemptTime: a preemptor may stop it
        side.kick()
    else:
        return False
    return True


def build_jobs(nodes: NodesForJobs, *, config: ClusterConfig, clock: Callable[[], float],
               wall: Callable[[], float], deadlines: Deadlines, changes: ChangeLog, site: Site,
               epoch: int, spawn: Callable[..., None] | None, history: FileHistory | None,
               programs: Callable[[], None], windows: Callable[[], Sequence[Window]],
               admit: Admit | None = None,
               limits: Callable[[], RuleOf | None] = lambda: None,
               record: Record | None = None, tree: Tree = lambda: None,
               qos: Callable[[], Iterable[Qos] | None] = lambda: None) -> JobSide:
    """The job side over `nodes`. `programs`: the node side's programs a change asked for, run
    after the scheduling pass that a submission or a command runs (power save's flush: a
    placement may power nodes up); `windows`: the reservations' windows (backfill's map);
    `admit`: AccountingStorageEnforce's rule (jobs/ports.py); `limits`: its limits' rules for
    the scheduling pass (None: not enforced); `record`: the event log's door, where each
    scheduling decision and each preemption is written with its inputs
    (ctld/jobs/decisions.py, ctld/jobs/preemption.py); `tree`: the accounting tree and its
    usage (priority/multifactor's fair share and QOS; None: accounting off); `qos`: the tree's
    QOS, for preempt/qos (None: accounting off)."""
    settings = JobSettings(config)
    launcher = Launcher(settings, nodes, site=site, epoch=epoch)
    # what follows a change of the store in the components built after it (`side`)
    events = StoreEvents(
        launch=launcher.launch, began=lambda job: _began(side, job),
        requeued=lambda job: _requeued(side, job), ending=lambda job: _ending(side, job),
        ended=lambda job: _ended(side, job), rearm=lambda job: _rearm(side, job),
        reopening=lambda job: side.accounting.reopening(job),
        restored=lambda: side.accounting.restored(), held=lambda job: side.accounting.held(job))
    store = JobStore(nodes, settings, changes, clock=clock, wall=wall, epoch=epoch, events=events)
    side = _components(store, settings, nodes, launcher, clock=clock, wall=wall,
                       deadlines=deadlines, changes=changes, spawn=spawn, history=history,
                       programs=programs, windows=windows, admit=admit, acct_limits=limits,
                       decisions=Decisions(record or (lambda *a, **k: None)), tree=tree,
                       qos=qos, record=record or (lambda *a, **k: None))
    return side


def _config_changed(settings: JobSettings, priorities: Priorities, store: JobStore
                    ) -> Callable[[ClusterConfig], None]:
    def config_changed(new: ClusterConfig) -> None:  # after the node side's deadlines cleared
        settings.use(new)
        priorities.use_config()
        store.config_changed()

    return config_changed


def _planners(store: JobStore, settings: JobSettings, nodes: NodesForJobs, starts: JobStarts,
              submission: JobSubmission, priorities: Priorities, *, clock: Callable[[], float],
              wall: Callable[[], float], programs: Callable[[], None],
              windows: Callable[[], Sequence[Window]],
              stats: SchedStats, decisions: Decisions, dependencies: Dependencies,
              acct_limits: Callable[[], RuleOf | None], preemptions: Preemptions
              ) -> tuple[WillRun, Backfill, WhyDesk, DryRuns]:
    """The components that plan over the pass's views: --test-only, the backfill cycle,
    rqueue --why and reconfigure --dry-run (each reads the queue; only backfill starts jobs)."""
    will_run = WillRun(store, settings, nodes, wall=wall, next_id=lambda: store.next_id,
                       check=submission.check_new, members=starts.members)
    backfill = Backfill(store, settings, clock=clock, wall=wall, cluster=starts.cluster,
                        waits=starts.waits, allocate=starts.allocate, programs=programs,
                        windows=windows, measured=stats.backfill_cycle, active=stats.set_active,
                        decisions=decisions, preemptions=preemptions)
    starts.after_each_pass(backfill.poke)  # each event pass is news for the next cycle
    why = WhyDesk(store, settings, nodes, wall=wall, snapshot=backfill.snapshot,
                  check=submission.check, dependency=dependencies.shown, limits=acct_limits)

    dry_runs = DryRuns(store, settings, under=priorities.under, snapshot=backfill.snapshot)
    return will_run, backfill, why, dry_runs


def _began(side: JobSide, job: Job) -> None:
    side.mail.notify(job, "BEGIN")
    side.inactive.started(job)  # an allocation's command has its limit to speak


def _requeued(side: JobSide, job: Job) -> None:
    side.steps.requeued(job)
    side.mail.notify(job, "REQUEUE")


def _ending(side: JobSide, job: Job) -> None:
    side.inactive.forget(job)
    side.steps.job_ended(job)  # its steps end with it, before the history has it


def _ended(side: JobSide, job: Job) -> None:
    side.mail.ended(job)
    side.accounting.ended(job)  # racct's history: written before the job may be purged


def _rearm(side: JobSide, job: Job) -> None:
    side.inactive.started(job, restart=True)  # a full InactiveLimit from now
    side.limits.arm(job)  # a limit rcontrol update lowered, if any


def _components(store: JobStore, settings: JobSettings, nodes: NodesForJobs, launcher: Launcher,
                *, clock: Callable[[], float], wall: Callable[[], float], deadlines: Deadlines,
                changes: ChangeLog, spawn: Callable[..., None] | None,
                history: FileHistory | None, programs: Callable[[], None],
                windows: Callable[[], Sequence[Window]], admit: Admit | None,
                acct_limits: Callable[[], RuleOf | None], decisions: Decisions,
                tree: Tree, qos: Callable[[], Iterable[Qos] | None],
                record: Callable[..., Any]) -> JobSide:
    """The store's components, each given what it uses of the others (bound methods, so that
    a request's stack stays in jobs/; a closure only where two need each other)."""
    mail = Mail(store, settings, spawn)
    stats = SchedStats(wall)
    dependencies = Dependencies(store, settings, clock=clock, deadlines=deadlines,
                                notify=mail.notify)
    listing = JobListing(store, nodes, wall=wall, dependency=dependencies.shown)
    accounting = Accounting(store, listing.record, settings, history, wall=wall,
                            state_changed=changes.state_changed)
    preemptions = Preemptions(store, settings, clock=clock, wall=wall, deadlines=deadlines,
                              qos=qos, record=record,
                              signal_step=lambda job, sid, sig: steps.cancel(job, sid, sig))
    starts = JobStarts(store, settings, nodes, clock=clock, wall=wall, deadlines=deadlines,
                       check=lambda req: submission.check(req),
                       dependency_reason=dependencies.reason, measured=stats.main_cycle,
                       limits=acct_limits, decisions=decisions,
                       preempt=preemptions.consider, preempted=preemptions.settle,
                       order=preemptions.order)
    submission = JobSubmission(store, settings, nodes, clock=clock, wall=wall,
                               members=starts.members, record=listing.record,
                               run_pass=starts.run, programs=programs, admit=admit)
    inactive = InactiveWatch(store, settings, clock=clock, deadlines=deadlines)
    limits = RunLimits(store, clock=clock, wall=wall, deadlines=deadlines)
    steps = JobSteps(store, settings, nodes, wall=wall,
                     never_delivered=launcher.never_delivered, step_ended=inactive.step_ended)
    reconciliation = JobReconciliation(store, settings, nodes, launcher,
                                       try_launch=starts.try_launch, clock=clock, wall=wall)
    updates = JobUpdate(store, settings, limits, check=submission.check,
                        forget_dependency=dependencies.forget)
    priorities = Priorities(store, settings, wall=wall, tree=tree)
    commands = JobCommands(store, settings, updates, cancel_step=steps.cancel,
                           watched=inactive.watched, alive=inactive.alive,
                           run_pass=starts.run, programs=programs, top=priorities.top)
    will_run, backfill, why, dry_runs = _planners(
        store, settings, nodes, starts, submission, priorities, clock=clock, wall=wall,
        programs=programs, windows=windows, stats=stats, decisions=decisions,
        dependencies=dependencies, acct_limits=acct_limits, preemptions=preemptions)

    return JobSide(
        store=store, settings=settings, submission=submission, starts=starts, launcher=launcher,
        reconciliation=reconciliation, commands=commands, updates=updates, listing=listing,
        steps=steps, inactive=inactive, limits=limits, dependencies=dependencies, mail=mail,
        accounting=accounting, will_run=will_run, backfill=backfill, priorities=priorities,
        sched_stats=stats, why=why, history=history, preemptions=preemptions,
        dry_runs=dry_runs,
        kick=store.kick, node_lost=reconciliation.node_lost,
        heartbeat=reconciliation.heartbeat, registered=reconciliation.registered,
        started=reconciliation.started, jobs_holding=listing.jobs_holding,
        jobs_running_until=listing.running_until,
        config_changed=_config_changed(settings, priorities, store))
