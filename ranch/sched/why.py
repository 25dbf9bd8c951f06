"""Why a pending job is not running, from the scheduler's own plain data: the constraint that
binds now with its evidence, the planner's estimate, and what would start it sooner (each
change tried on a copy by the planner, kept only where the planner confirms it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from ranch.conf import hostlist
from ranch.conf.timefmt import slurm_timestamp
from ranch.sched import backfill as planner
from ranch.sched.bffit import NEVER, Timelines, releases, sig_of
from ranch.sched.bfmap import Clock
from ranch.sched.features import matches_features
from ranch.sched.fifo import RESERVED, Cluster, Queued
from ranch.sched.model import Ending, Estimate, Pending, Planned, Start, Window
from ranch.sched.whylimits import LimitView, limit_evidence

HELD = ("JobHeldUser", "JobHeldAdmin", "job requeued in held state")
TOP_EVIDENCE = 6  # evidence items of one kind shown (the rest counted)


@attrs.frozen
class NodeNote:
    """A node as a person reads it: its state words and the reason an admin or a guard gave."""

    state: str
    reason: str = ""


@attrs.frozen
class Scene:
    """What an explanation reads: the backfill planner's snapshot (the queue in priority
    order, running jobs' end bounds, the windows) and each node's state words."""

    cluster: Cluster
    queue: tuple[Queued, ...]
    ends: tuple[Ending, ...]
    now: float
    params: planner.Params
    windows: tuple[Window, ...] = ()
    notes: Mapping[str, NodeNote] = attrs.field(factory=dict)


@attrs.frozen
class Suggestion:
    """A change to the job that the planner, run on a copy with it, starts sooner."""

    option: str  # the option as rbatch/rcontrol update take it: --time=50, -p debug, -N 2
    text: str
    start: float  # the planner's start for the changed job (now: at the next pass)
    nodes: tuple[str, ...]


@attrs.frozen
class Explanation:
    job_id: int
    reason: str  # Slurm's reason token, as squeue shows it
    binding: str  # one sentence: the constraint that binds now, with its evidence
    evidence: tuple[str, ...] = ()
    start: float | None = None  # the planner's estimate (None: none)
    nodes: tuple[str, ...] = ()
    estimate: str = ""  # how the estimate came, or why there is none
    suggestions: tuple[Suggestion, ...] = ()


def explain(scene: Scene, job_id: int, reason: str = "", *, detail: str = "",
            limit: LimitView | None = None, elsewhere: Sequence[Pending] = (),
            when: Callable[[float], str] = slurm_timestamp) -> Explanation:
    """Explain the queued job `job_id`. `reason`: the pass's reason on it (what squeue shows);
    `detail`: a few words for a reason decided outside the nodes (the dependency as shown, who
    held it, its BeginTime); `limit`: the accounting limit's rule and the jobs holding under
    it, when a limit holds the job; `elsewhere`: the job resolved for each other partition it
    may use."""
    index = next((i for i, q in enumerate(scene.queue) if q.job.id == job_id), None)
    if index is None:
        return Explanation(job_id, reason or "None", f"{reason or 'None'}: not in the queue "
                           "the scheduler plans (it changed since)")
    q = scene.queue[index]
    cycle, ahead = _ahead(scene, index)
    est = cycle.fork().consider(q)
    why = q.waits or (est.reason if not isinstance(est, Start) else "") or reason
    binding, evidence = _binding(scene, q, why, ahead, detail, limit, when)
    start, nodes, how = _estimate(scene, est, when)
    tested = sum(1 for a in scene.queue[:index] if not a.waits)
    if scene.params.max_job_test and tested >= scene.params.max_job_test and not q.waits:
        how += (f"; past bf_max_job_test={scene.params.max_job_test}: a backfill cycle does "
                "not test it (ranch_estimate_all gives it an estimate)")
    tips: tuple[Suggestion, ...] = ()
    if not q.waits and not isinstance(est, Start):
        tips = suggestions(scene, cycle, ahead, q.job, est, elsewhere, when)
    token = q.waits or (reason if reason not in ("", "None") else why)  # what squeue shows
    if token != why and {token.split(",")[0], why} == {"ReqNodeNotAvail", "Resources"}:
        binding = token + binding[len(why):]  # the pass's word for the same shortage
    return Explanation(job_id, token or "None", binding, evidence, start, nodes, how, tips)


def _ahead(scene: Scene, index: int) -> tuple[planner.Cycle, list[Estimate]]:
    """The planner over the jobs ahead of queue position `index`, every one tested (the
    bf_max_* limits lifted: the estimate of a job past them is for display), and its cycle
    there: each try of the job, changed or not, plans on a fork of it."""
    params = attrs.evolve(scene.params, max_job_test=0, max_job_user=0, max_job_part=0,
                          estimate_all=False)
    cycle = planner.Cycle(scene.cluster, scene.ends, scene.now, params, scene.windows)
    return cycle, [cycle.consider(q) for q in scene.queue[:index]]


def _estimate(scene: Scene, est: Estimate, when: Callable[[float], str]
              ) -> tuple[float | None, tuple[str, ...], str]:
    if isinstance(est, Start):
        return scene.now, tuple(est.shares), "it fits now: the next scheduling pass starts it"
    if isinstance(est, Planned):
        return (max(est.start, scene.now), est.nodes,
                "the planner's: the jobs ahead end by their time limits, these nodes are "
                "reserved for it from then")
    return None, (), f"no estimate: {est.why}"


# -- the binding constraint ----------------------------------------------------------------


def _binding(scene: Scene, q: Queued, why: str, ahead: Sequence[Estimate], detail: str,
             limit: LimitView | None, when: Callable[[float], str]
             ) -> tuple[str, tuple[str, ...]]:
    job = q.job
    if why in HELD:
        who = {"JobHeldUser": "its user", "JobHeldAdmin": "an admin"}.get(why, "its requeue")
        return f"{why}: held by {who}; `rcontrol release {job.id}` lets it be scheduled", ()
    if why.startswith("Dependency"):
        words = "can never be satisfied" if why == "DependencyNeverSatisfied" else "not yet met"
        return f"{why}: its dependency {detail or ''} is {words}".replace("  ", " "), ()
    if why == "BeginTime":
        return f"BeginTime: it may not start before {detail or 'its begin time'}", ()
    if why == "JobArrayTaskLimit":
        return f"JobArrayTaskLimit: its array runs as many tasks as its %N allows{detail}", ()
    if limit is not None and q.waits:
        return limit_evidence(why, limit, job.id)
    if why in ("PartitionDown", "PartitionTimeLimit", "PartitionNodeLimit", "PartitionConfig"):
        return _partition(scene, job, why), ()
    if why == RESERVED or why.startswith("ReqNodeNotAvail, May be reserved"):
        return _reserved(scene, job, when)
    if why == "Priority":
        return _priority(scene, job, ahead, when)
    if why == "Resources" or why.startswith("ReqNodeNotAvail"):
        return _resources(scene, job, why, when)
    return f"{why or 'None'}: {detail or 'the scheduler has not looked at it yet'}", ()


def _partition(scene: Scene, job: Pending, why: str) -> str:
    part = scene.cluster.partitions.get(job.partition)
    if part is None or why == "PartitionDown":
        return f"PartitionDown: partition {job.partition} is not up"
    if why == "PartitionTimeLimit":
        asked = "no time limit" if job.time_limit is None else f"{job.time_limit} min"
        return (f"PartitionTimeLimit: it asks {asked}, partition {part.name}'s MaxTime is "
                f"{part.max_time} min")
    return (f"{why}: it asks {max(job.num_nodes, len(job.req_nodes))} node(s), partition "
            f"{part.name} has {part.size[0]} node(s) and {part.size[1]} CPUs")


def shape_words(job: Pending) -> str:
    """"4 nodes with 8 CPUs, 1 GPU each" (what the job asks of each node)."""
    n = job.need
    each = [f"{n.cpus_per_task if n.spread else n.cpus} CPU(s)"]
    if n.mem:
        each.append(f"{n.mem} MB")
    per_node_gpus = n.spread and n.gpus and not n.gpus_per_task  # -n 4 --gres=gpu:1
    if (gpus := sig_of(n)[0][2]) and not per_node_gpus:
        each.append(f"{gpus} GPU(s)")
    if n.spread:
        head = f"{n.tasks} task(s) of {', '.join(each)} on at least {max(1, n.nodes)} node(s)"
        if per_node_gpus:
            head += f", {n.gpus} GPU(s) on each"
    else:
        head = f"{n.nodes} node(s) with {', '.join(each)} each"
    return head + (", whole nodes" if n.exclusive else "")


def eligible(scene: Scene, job: Pending) -> list[str]:
    """The nodes the job may run on: its partition's (less -x, matching -C) and its -w ones."""
    c = scene.cluster
    exc = set(job.exc_nodes)
    out = [n for n in c.members.get(job.partition, ()) if n in c.nodes and n not in exc
           and matches_features(job.constraint, c.nodes[n])]
    return list(dict.fromkeys([*job.req_nodes, *out]))


def _resources(scene: Scene, job: Pending, why: str, when: Callable[[float], str]
               ) -> tuple[str, tuple[str, ...]]:
    """Each node it may use: free enough now, out of service (with its reason), too small,
    or holding jobs (until their time limits)."""
    names = eligible(scene, job)
    c = scene.cluster
    order = planner.node_order(c)
    index = {n.name: i for i, n in enumerate(order)}
    clock = Clock.of(scene.now, scene.params.resolution, scene.params.window * 60)
    lines = Timelines(order, c.uses, releases(scene.ends, c.uses, clock.freed))
    sig, k = sig_of(job.need)
    free, out, small, busy = [], [], [], []
    until = {e.job_id: e.at for e in scene.ends}
    for name in names:
        i = index.get(name)
        if i is None:
            note = scene.notes.get(name, NodeNote("out of service"))
            out.append(f"{name}: {note.state}{' (' + note.reason + ')' if note.reason else ''}")
            continue
        reach = max(lines.reach(i, dim, x) for dim, x in Timelines.keys(sig))
        if reach == 0:
            free.append(name)
        elif reach == NEVER and not c.uses.get(name):
            small.append(name)
        else:
            holders = sorted(c.uses[name].jobs) if name in c.uses else []
            ends = [until[j] for j in holders if j in until]
            last = f" until {when(max(ends))}" if ends and len(ends) == len(holders) else ""
            busy.append(f"{name}: jobs {','.join(map(str, holders))}{last}" if holders
                        else f"{name}: busy")
    parts = [f"{len(free)} free ({hostlist.fold(free)})" if free else "0 free"]
    if out:
        parts.append(f"{len(out)} out of service")
    if busy:
        parts.append(f"{len(busy)} allocated")
    if small:
        parts.append(f"{len(small)} too small ({hostlist.fold(small)})")
    head = (f"{why}: needs {shape_words(job)}; of the {len(names)} node(s) it may use "
            f"in {job.partition}: {', '.join(parts)}")
    if k > len(free) + len(busy):
        head += f"; only {len(free) + len(busy)} in service could ever hold it"
    return head, tuple(_top(out, "out of service") + _top(busy, "allocated"))


def _top(items: list[str], what: str) -> list[str]:
    if len(items) <= TOP_EVIDENCE:
        return items
    return [*items[:TOP_EVIDENCE], f"... and {len(items) - TOP_EVIDENCE} more {what}"]


def _priority(scene: Scene, job: Pending, ahead: Sequence[Estimate],
              when: Callable[[float], str]) -> tuple[str, tuple[str, ...]]:
    """The jobs ahead of it that hold reservations on the nodes it may use, or start now on
    them; else the first job ahead in its partition that waits for resources."""
    mine = set(eligible(scene, job))
    held: list[tuple[int, float, tuple[str, ...]]] = []
    for e in ahead:
        if isinstance(e, Planned) and mine & set(e.nodes):
            held.append((e.job_id, e.start, tuple(sorted(mine & set(e.nodes)))))
        elif isinstance(e, Start) and mine & set(e.shares):
            held.append((e.job_id, scene.now, tuple(sorted(mine & set(e.shares)))))
    if held:
        ids = ", ".join(str(h[0]) for h in held[:TOP_EVIDENCE])
        more = f" and {len(held) - TOP_EVIDENCE} more" if len(held) > TOP_EVIDENCE else ""
        nodes = hostlist.fold(sorted({n for h in held for n in h[2]}))
        first = min(h[1] for h in held)
        return (f"Priority: jobs {ids}{more} ahead of it hold reservations on {nodes} from "
                f"{when(first)}",
                tuple(f"job {j}: {hostlist.fold(list(n))} from {when(t)}"
                      for j, t, n in held[:TOP_EVIDENCE]))
    waiting = [e.job_id for e in ahead if not isinstance(e, Start)
               and e.reason == "Resources" and e.job_id in _in_partition(scene, job)][:1]
    if waiting:
        return (f"Priority: job {waiting[0]} ahead of it in partition {job.partition} waits "
                "for resources, and nothing behind it may take them first"), ()
    return "Priority: jobs ahead of it come first", ()


def _in_partition(scene: Scene, job: Pending) -> set[int]:
    return {q.job.id for q in scene.queue if q.job.partition == job.partition}


def _reserved(scene: Scene, job: Pending, when: Callable[[float], str]
              ) -> tuple[str, tuple[str, ...]]:
    """The windows (reservations, maintenance) its run from now would cross."""
    mine = set(eligible(scene, job))
    limit = job.time_limit
    if limit is None:
        limit = getattr(scene.cluster.partitions.get(job.partition), "max_time", None)
    end = scene.now + limit * 60 if limit is not None else float("inf")
    hit = sorted((w for w in scene.windows
                  if w.nodes & mine and w.begin < end and w.end > scene.now),
                 key=lambda w: (w.begin, w.end, sorted(w.nodes)))  # not the order given
    if not hit:
        return f"{RESERVED}: nodes it may use are reserved", ()
    asked = "no time limit" if limit is None else f"{limit} min"
    w = hit[0]
    return (f"Reserved: a reservation holds {hostlist.fold(sorted(w.nodes & mine))} from "
            f"{when(w.begin)} to {when(w.end)}; a run of {asked} from now would cross it",
            tuple(f"window on {hostlist.fold(sorted(x.nodes & mine))}: {when(x.begin)} to "
                  f"{when(x.end)}" for x in hit[1:TOP_EVIDENCE]))


# -- what would start it sooner --------------------------------------------------------------


def _rank(scene: Scene, est: Estimate) -> float:
    if isinstance(est, Start):
        return scene.now
    if isinstance(est, Planned):
        return max(est.start, scene.now)
    return float("inf")


def suggestions(scene: Scene, cycle: planner.Cycle, ahead: Sequence[Estimate], job: Pending,
                est: Estimate, elsewhere: Sequence[Pending], when: Callable[[float], str]
                ) -> tuple[Suggestion, ...]:
    """A shorter time limit that ends before what holds its nodes, another partition it may
    use, fewer nodes: each kept only where the planner, trying the changed job in its place
    (on a fork of `cycle`, the plan of the jobs `ahead`), starts it sooner."""
    now_rank = _rank(scene, est)
    out: list[Suggestion] = []

    def keep(changed: Pending, option: str, what: str) -> bool:
        got = cycle.fork().consider(Queued(changed))
        if _rank(scene, got) >= now_rank:
            return False
        start = _rank(scene, got)
        nodes = tuple(got.shares) if isinstance(got, Start) else getattr(got, "nodes", ())
        at = "now" if isinstance(got, Start) else f"at {when(start)}"
        out.append(Suggestion(option, f"{what}: it would start {at}", start, nodes))
        return True

    for minutes in _shorter(scene, ahead, job):
        if keep(attrs.evolve(job, time_limit=minutes), f"--time={minutes}",
                f"a time limit of {minutes} min"):
            break
    for alt in elsewhere:
        keep(alt, f"--partition={alt.partition}", f"partition {alt.partition}")
    n = job.need
    if not n.spread and not job.req_nodes and n.nodes > 1:
        for k in sorted({n.nodes - 1, max(1, n.nodes // 2), 1}, reverse=True):
            fewer = attrs.evolve(job, need=attrs.evolve(n, nodes=k), num_nodes=k)
            if keep(fewer, f"--nodes={k}", f"{k} node(s) instead of {n.nodes}"):
                break
    return tuple(out)


def _shorter(scene: Scene, ahead: Sequence[Estimate], job: Pending) -> list[int]:
    """Time limits (minutes, longest first) that end before something holding the job's nodes
    begins: a window, a reservation of a job ahead of it."""
    mine = set(eligible(scene, job))
    limit = job.time_limit
    if limit is None:
        limit = getattr(scene.cluster.partitions.get(job.partition), "max_time", None)
    begins = [w.begin for w in scene.windows if w.nodes & mine and w.begin > scene.now]
    for e in ahead:
        if isinstance(e, Planned) and mine & set(e.nodes):
            begins.append(e.start)
    res = scene.params.resolution
    out = set()
    for b in begins:
        minutes = int((b - scene.now - res) // 60)  # a slot's margin: the map's resolution
        if 1 <= minutes and (limit is None or minutes < limit):
            out.add(minutes)
    return sorted(out, reverse=True)[:4]
