"""Job submission: the checks a SubmitJob must pass (partition, nodes, limits, MaxJobCount,
MaxArraySize), building its jobs, and queueing them once journalled."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from sys import intern
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.jobs import jobextras, limitpass, partlimits, requestchecks
from ranch.ctld.jobs.jobrecord import (
    NOT_AVAILABLE,
    PENDING,
    TOP_PRIORITY,
    Job,
    array_throttle,
    parse_array,
)
from ranch.ctld.kept import kept
from ranch.protocol import messages as m
from ranch.protocol.replace import replace
from ranch.sched import limits as sched_limits
from ranch.sched.model import Need
from ranch.sched.place import capacity_fits, cpus_per_node, task_capacity
from ranch.statemachine.jobstates import FINAL

if TYPE_CHECKING:
    from ranch.ctld.jobs.ports import Admit, Intake, NodesForJobs
    from ranch.ctld.jobs.settings import JobSettings


@attrs.frozen
class Checked:
    """A submission that passed _check, resolved against the config."""

    partition: str
    need: Need
    req_nodes: tuple[str, ...]
    exc_nodes: tuple[str, ...]
    time_limit: int | None  # minutes; None = UNLIMITED
    tasks: list[int | None]  # array task ids, or [None] for a plain job
    over: tuple[str, str] | None = None  # the partition limit it exceeds (partlimits.py)
    alt: tuple[str, ...] = ()  # -p a,b: the other partitions it may run in, in order
    admitted: tuple[str, str] | None = None  # (account, QOS) AccountingStorageEnforce resolved


def _spread_need(req: m.SubmitJob, part: str, num_nodes: int, members: dict[str, Any],
                 req_nodes: Sequence[str], exc_nodes: Sequence[str]) -> Need | str:
    """-n without -N (or -N min-max): the tasks go over as many nodes as they need. Refused
    (the message returned) only when no set of the partition's nodes could ever hold them."""
    top = req.max_nodes or 0
    if top and top < num_nodes:
        return f"--nodes {num_nodes}-{top}: the maximum is below the minimum"
    gpt = req.gpus_per_task
    need = Need(num_nodes, req.cpus_per_task, req.mem_mib, gpt or req.gpus, req.exclusive,
                spread=True, tasks=req.ntasks, cpus_per_task=req.cpus_per_task,
                max_nodes=top, gpus_per_task=gpt)
    held = [task_capacity(members[n].cfg, need) for n in dict.fromkeys(req_nodes)]
    excluded = set(exc_nodes) | set(req_nodes)
    rest = sorted((task_capacity(n.cfg, need) for name, n in members.items()
                   if name not in excluded), reverse=True)
    rest = [c for c in rest if c > 0]
    best = held + rest[: max(0, top - len(held))] if top else held + rest
    if len(best) >= num_nodes and sum(best) < req.ntasks:  # too few nodes: the caller says so
        upto = f"{top} " if top else ""
        each = f"{req.cpus_per_task} CPU(s)" + (f" and {gpt} GPU(s)" if gpt else "")
        return (f"{NOT_AVAILABLE}: {req.ntasks} task(s) of {each} each; "
                f"{upto}node(s) of partition {part} hold {sum(best)} such task(s) at most")
    # the fewest nodes that could hold the tasks (each node's CPUs counted): rqueue's NODES
    held_tasks = fewest = 0
    while fewest < len(best) and held_tasks < req.ntasks:
        held_tasks += best[fewest]
        fewest += 1
    return attrs.evolve(need, nodes=max(num_nodes, fewest))


class JobSubmission:
    """Submissions into the job store: submit = build (ids reserved) + accept."""

    def __init__(self, jobs: Intake, settings: JobSettings, nodes: NodesForJobs, *,
                 clock: Callable[[], float], wall: Callable[[], float],
                 members: Callable[[Any], list[Any]], record: Callable[[Job], dict[str, Any]],
                 run_pass: Callable[[], None], programs: Callable[[], None],
                 admit: Admit | None = None) -> None:
        """`members`: a partition's nodes in placement order (ctld/jobs/jobstart.py); `record`:
        a job's listing record (ralloc's first look); `run_pass`: the scheduling pass, if one is
        due; `programs`: then the node side's programs it asked for (a resume); `admit`:
        AccountingStorageEnforce's rule over the accounting tree (ctld/jobs/ports.py Admit)."""
        self._jobs = jobs
        self._settings = settings
        self._nodes = nodes
        self._clock = clock
        self._wall = wall
        self._members = members
        self._record = record
        self._run_pass = run_pass
        self._programs = programs
        self._admit = admit
        self._maps: dict[str, tuple[list[Any], dict[str, Any]]] = {}
        self._fits: dict[tuple[Any, ...], tuple[dict[str, Any], Need | m.Error]] = {}
        self._sizes = partlimits.Sizes()  # each partition's node count and CPUs

    def member_map(self, pc: Any) -> dict[str, Any]:
        """The partition's nodes by name, kept while its members stay (callers only read it)."""
        nodes = self._members(pc)
        hit = self._maps.get(pc.name)
        if hit is not None and hit[0] is nodes:
            return hit[1]
        by_name = {n.name: n for n in nodes}
        self._maps[pc.name] = (nodes, by_name)
        return by_name

    def submit(self, req: m.SubmitJob) -> m.SubmitReply | m.Error:
        """Check, build and queue at once (no journal: Durability.submit journals between
        `build` and `accept`)."""
        built = self.build(req)
        return built if isinstance(built, m.Error) else self.accept(built)

    def build(self, req: m.SubmitJob) -> list[Job] | m.Error:
        """Check a submission and build its jobs, their ids reserved, without queueing them:
        nothing may start before the caller has them on disk (`accept` then queues them)."""
        checked = self.check_new(req)
        if isinstance(checked, m.Error):
            return checked
        if checked.admitted is not None:  # the job keeps the account and QOS it runs under
            req = replace(req, account=intern(checked.admitted[0]),
                          qos=intern(checked.admitted[1]))
        wall, now = self._wall(), self._clock()
        built: list[Job] = []
        env_json = kept(orjson.dumps(req.env)) if req.env else None
        req = replace(req, env=(), user=intern(req.user), workdir=intern(req.workdir),
                      stdout=intern(req.stdout), submit_host=intern(req.submit_host),
                      partition=intern(req.partition))  # shared by the jobs naming them
        first = self._jobs.new_ids(len(checked.tasks))
        need = checked.need
        for jid, task in enumerate(checked.tasks, first):
            stdout = req.stdout or ("slurm-%A_%a.out" if task is not None else "slurm-%j.out")
            built.append(Job(
                id=jid, req=req, partition=checked.partition, time_limit=checked.time_limit,
                priority=jobextras.priority(TOP_PRIORITY - jid, req), submit_time=wall, need=need,
                req_nodes=checked.req_nodes, exc_nodes=checked.exc_nodes, stdout=stdout,
                held="user" if req.hold else "",
                array_job_id=first if task is not None else 0, array_task_id=task,
                array_throttle=array_throttle(req.array) if task is not None else 0,
                alt_parts=checked.alt,
                submitted_at=now, env_json=env_json,
            ))
        # the reasons the journal keeps until a pass runs (at once, or after a restart)
        if req.hold:
            reason = "JobHeldUser"
        elif req.begin_time is not None and req.begin_time > wall:
            reason = "BeginTime"
        elif checked.over is not None and not checked.alt:
            reason = checked.over[0]  # a pass that stops at a blocked partition keeps it
        else:
            reason = "None"
        for job in built:
            job.reason = reason
        return built

    def retract(self, accepted: Sequence[Job]) -> None:
        """Accepted jobs whose journal write failed: gone as if never submitted. Nothing of
        them reached a node (their LaunchJob waited in the outbox for that write)."""
        self._jobs.drop(accepted)
        logs.event("submission retracted: not written to disk",
                   jobs=",".join(str(j.id) for j in accepted))

    def accept(self, built: Sequence[Job]) -> m.SubmitReply:
        """Queue jobs from `build` and run a scheduling pass. The caller journals them before
        its reply, and retracts them if it cannot (their launches wait for that write)."""
        for job in built:
            # a job with -d keeps None: the pass (or its look below a stop) judges the
            # dependency first, as slurmctld leaves a dependent job out of its queue
            if job.reason == "None" and not job.req.dependency and \
                    self._jobs.pending_parts.get(job.partition):
                job.reason = "Priority"
            self._jobs.insert(job)
        first, req, need = built[0].id, built[0].req, built[0].need
        logs.event("job submitted", job=first, jobs=len(built), user=req.user,
                   partition=built[0].partition, nodes=need.nodes, cpus=need.cpus)
        # A held job can start nothing, nor change another's reason: no pass for it (a pass
        # reads every pending job, so a queue of held jobs made each submission O(queue)).
        if not all(job.held for job in built):
            self._jobs.kick()
        self._run_pass()
        self._programs()  # any resume program the pass asked for
        for job in built:
            if req.allocation and job.state != PENDING:  # placed (or failed) at once
                job.accrued = False
                self._jobs.touch(job)
        decided = req.allocation and built[0].state != PENDING  # ralloc's first look: no request
        return m.SubmitReply(job_id=first, job_ids=tuple(j.id for j in built),
                             job=self._record(built[0]) if decided else {})

    def check_new(self, req: m.SubmitJob) -> Checked | m.Error:
        """A new submission (rbatch, ralloc, rrun, --test-only): `check`, then its association,
        QOS and submit limit under AccountingStorageEnforce (slurmctld's _job_create)."""
        checked = self.check(req)
        if isinstance(checked, m.Error) or self._admit is None:
            return checked
        parts = (checked.partition, *checked.alt)
        got = self._admit(req.user, req.account, parts, req.qos,
                          req.reservation, len(checked.tasks),
                          limitpass.asked(checked.need, checked.time_limit, req.time_limit),
                          self._groups)
        if isinstance(got, str):
            return m.Error("bad_request", got)
        if got is None:
            return checked
        account, qos, fitted = got
        pc = self._settings.config.partition(checked.partition)
        if fitted is not None and req.time_limit is None and req.time_limit_s is None and \
                (pc is None or pc.default_time is None):
            # no time asked nor DefaultTime: the limits give it one (acct_policy_validate)
            checked = attrs.evolve(checked, time_limit=fitted)
        return attrs.evolve(checked, admitted=(account, qos))

    def _groups(self) -> Counter[tuple[str, str, str, str]]:
        """The jobs not ended by (user, account, partition, QOS): the submit limits' counts."""
        return Counter((job.req.user, job.req.account, job.partition, job.req.qos)
                       for job in self._jobs.jobs.values() if job.state not in FINAL)

    def check(self, req: m.SubmitJob) -> Checked | m.Error:
        """A submission checked against the config and the nodes: what it needs in the
        partition it would run in, or the refusal naming the field."""
        cfg = self._settings.config

        def bad(message: str, fld: str) -> m.Error:
            return m.Error("bad_request", message, field=fld)

        refused = requestchecks.refused(req)
        if refused is not None:
            return refused
        if req.partition:  # -p a,b: each checked; the job waits in those it may run in
            pcs = [cfg.partition(name) for name in req.partition.split(",") if name]
            if None in pcs or not pcs:
                return bad(f"invalid partition specified: {req.partition}", "partition")
        else:
            pcs = [cfg.default_partition]
            if pcs[0] is None:
                return bad("no partition given (-p) and the config names no Default=YES "
                           "partition", "partition")
        chosen = partlimits.choose([self._check_part(req, pc) for pc in pcs],
                                   cfg.jobs.enforce_part_limits)
        if isinstance(chosen, m.Error):
            return chosen
        tasks: list[int | None] = [None]
        if req.array:
            try:
                tasks = list(parse_array(req.array, cfg.jobs.max_array_size))
            except ValueError as exc:
                return bad(str(exc) if "array" in str(exc) else f"--array={req.array}: {exc}",
                           "array")
        held = len(self._jobs.jobs) + self._jobs.building
        if held + len(tasks) > cfg.jobs.max_job_count:  # Slurm answers EAGAIN: try later
            return m.Error("bad_request", f"Slurm temporarily unable to accept job: "
                           f"MaxJobCount={cfg.jobs.max_job_count} reached ({held} jobs held, "
                           f"{len(tasks)} more asked)")
        first = chosen[0]
        return attrs.evolve(first, tasks=tasks, alt=tuple(c.partition for c in chosen[1:]))

    def _check_part(self, req: m.SubmitJob, pc: Any) -> Checked | m.Error:
        """The job in one partition: refused, or what it needs there (`over`: the partition
        limit it exceeds, partlimits.py)."""

        def bad(message: str, fld: str) -> m.Error:
            return m.Error("bad_request", message, field=fld)

        if pc.state in ("DRAIN", "INACTIVE"):
            return bad(f"partition {pc.name} is {pc.state}: it accepts no new jobs",
                       "partition")
        members = self.member_map(pc)
        members, refused = jobextras.screen(self._nodes.nodes, req, members)  # -C, -d, --nice...
        if refused is not None:
            return refused
        try:
            req_nodes = tuple(hostlist.expand(req.nodelist)) if req.nodelist.strip() else ()
            exc_nodes = tuple(hostlist.expand(req.exclude)) if req.exclude.strip() else ()
        except ValueError as exc:
            return bad(f"bad hostlist: {exc}", "nodelist")
        for fld, names in (("nodelist", req_nodes), ("exclude", exc_nodes)):
            unknown = [n for n in names if n not in self._nodes.nodes]
            if unknown:
                return bad(f"invalid node name specified: {hostlist.fold(unknown)}", fld)
        outside = [n for n in req_nodes if n not in members]
        if outside:
            return bad(f"{NOT_AVAILABLE}: node(s) {hostlist.fold(outside)} are not in partition "
                       f"{pc.name}", "nodelist")
        both = set(req_nodes) & set(exc_nodes)
        if both:
            return bad(f"node(s) {hostlist.fold(sorted(both))} are both required (-w) and "
                       "excluded (-x)", "exclude")
        limit = req.time_limit
        if limit is None:
            limit = pc.default_time if pc.default_time is not None else pc.max_time
        nodes = max(req.num_nodes, len(set(req_nodes)))
        cpus = max(req.ntasks * req.cpus_per_task, nodes)
        size = self._sizes.of(pc.name, members, (n.cfg.cpus for n in members.values()))
        over = sched_limits.over(limit, nodes, cpus, pc.max_time, size)
        if over is not None and over is not sched_limits.TIME:
            # more than the partition holds: it waits there (EnforcePartLimits=NO) as asked;
            # -n without -N on as many of its largest nodes as the tasks need (slurmctld's
            # NumNodes for such a job)
            if req.max_nodes == 0 and members:
                most = max(n.cfg.cpus for n in members.values()) or 1
                nodes = max(nodes, -(-req.ntasks * req.cpus_per_task // most))
                need = Need(nodes, req.cpus_per_task, req.mem_mib, req.gpus, req.exclusive,
                            spread=True, tasks=req.ntasks, cpus_per_task=req.cpus_per_task)
            else:
                need = Need(nodes, cpus_per_node(req.ntasks, req.cpus_per_task, nodes),
                            req.mem_mib, req.gpus, req.exclusive)
        else:
            need_or_error = self.fit(req, pc, members, req_nodes, exc_nodes)
            if isinstance(need_or_error, m.Error):
                return need_or_error
            need = need_or_error
        return Checked(pc.name, need, req_nodes, exc_nodes, limit, [None], over)

    def fit(self, req: m.SubmitJob, pc: Any, members: dict[str, Any],
            req_nodes: tuple[str, ...], exc_nodes: tuple[str, ...]) -> Need | m.Error:
        """What the job needs per node, or the refusal when no set of the partition's nodes
        could ever hold it. It reads only the nodes' configured sizes, so it is kept for the
        same request shape while the partition's members stay (a submission cost O(nodes)
        here: 20 ms a job at 10,000 nodes)."""
        key = (pc.name, req.num_nodes, req.max_nodes, req.ntasks, req.cpus_per_task,
               req.mem_mib, req.gpus, req.gpus_per_task, req.exclusive, req_nodes, exc_nodes)
        hit = self._fits.get(key)
        if hit is not None and hit[0] is members:
            return hit[1]
        got = self._fit(req, pc, members, req_nodes, exc_nodes)
        if len(self._fits) >= 512:
            self._fits.clear()
        self._fits[key] = (members, got)
        return got

    def _fit(self, req: m.SubmitJob, pc: Any, members: dict[str, Any],
             req_nodes: tuple[str, ...], exc_nodes: tuple[str, ...]) -> Need | m.Error:
        def bad(message: str, fld: str) -> m.Error:
            return m.Error("bad_request", message, field=fld)

        num_nodes = max(req.num_nodes, len(set(req_nodes)))
        # tasks that do not divide evenly over the nodes are laid out as Slurm does (-N 2 -n 3
        # holds 2 CPUs on one node and 1 on the other, not 2 on each): spread over them
        uneven = req.ntasks_given and num_nodes > 1 and req.ntasks % num_nodes != 0
        if (req.max_nodes is not None and req.max_nodes != num_nodes) or uneven:
            spread = _spread_need(req, pc.name, num_nodes, members, req_nodes, exc_nodes)
            if isinstance(spread, str):
                return bad(spread, "ntasks" if req.max_nodes == 0 else "max_nodes")
            need = spread
        else:
            need = Need(num_nodes, cpus_per_node(req.ntasks, req.cpus_per_task, num_nodes),
                        req.mem_mib, req.gpus, req.exclusive)
        cpus = need.cpus
        fitting = [n for name, n in members.items()
                   if name not in exc_nodes and capacity_fits(n.cfg, need)]
        short = [n for n in req_nodes if not capacity_fits(members[n].cfg, need)]
        if short:
            return bad(f"{NOT_AVAILABLE}: node(s) {hostlist.fold(short)} have fewer than {cpus} "
                       f"CPUs, {req.mem_mib} MB or {req.gpus} GPU(s)", "nodelist")
        if len(fitting) < num_nodes:
            # Name the resource no node has enough of (the field to change), not num_nodes.
            usable = [n.cfg for name, n in members.items() if name not in exc_nodes]
            lacking: list[tuple[str, str]] = []
            for fld, want, unit, most_unit, get in (
                    ("cpus_per_task" if req.ntasks == 1 else "ntasks", cpus, "CPU(s)", "",
                     lambda c: c.cpus),
                    ("mem_mib", need.mem, "MB of memory", " MB", lambda c: c.real_memory),
                    ("gpus", need.gpus, "GPU(s)", "", lambda c: c.gpus)):
                count = sum(get(c) >= want for c in usable)
                if len(usable) < num_nodes or count >= num_nodes:
                    continue
                most = max(map(get, usable))
                why = (f"the job needs {want} {unit} per node; the nodes of partition "
                       f"{pc.name} have {most}{most_unit} at most" if count == 0 else
                       f"the job needs {want} {unit} on each of {num_nodes} nodes; "
                       f"partition {pc.name} has {count} such node(s)")
                lacking.append((fld, why))
            if lacking:
                return bad(f"{NOT_AVAILABLE}: " + "; ".join(why for _, why in lacking),
                           lacking[0][0])
            what = f"{cpus} CPU(s)"
            if req.mem_mib:
                what += f", {req.mem_mib} MB of memory"
            if req.gpus:
                what += f", {req.gpus} GPU(s)"
            return bad(f"{NOT_AVAILABLE}: the job needs {num_nodes} node(s) with {what} each; "
                       f"partition {pc.name} has {len(fitting)} such node(s)", "num_nodes")
        return need
