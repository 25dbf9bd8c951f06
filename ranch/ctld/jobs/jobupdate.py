"""rcontrol update JobId=... Key=Value: a job's fields changed as slurmctld's update_job changes
them, with its permission rules and its words for each refusal (Slurm 22.05)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from ranch.conf.timefmt import parse_minutes
from ranch.ctld import logs
from ranch.ctld.jobs import dependencies, jobextras
from ranch.ctld.jobs.jobrecord import ACTIVE, PENDING, RUNNING, Job
from ranch.ctld.rights import DENIED, Identity
from ranch.protocol import messages as m
from ranch.statemachine import jobevents as je

if TYPE_CHECKING:
    from ranch.ctld.deadlines import Deadlines
    from ranch.ctld.jobs.ports import JobDoor, Reorder
    from ranch.ctld.jobs.settings import JobSettings

# slurmctld's words (slurm_errno.c)
FINISHED = "Job/step already completing or completed"
NOT_PENDING = "Job is no longer pending execution"
BAD_PARTITION = "Invalid partition name specified"
PART_CONFIG = "Requested partition configuration not available now"
NOT_SUPPORTED = "Requested operation not supported on this system"
BAD_NODES = "Node count specification invalid"
HELD = "Job is in held state, pending scheduler release"
PRIO_RESET = "Changes to job priority are not persistent, change nice instead"
BAD_DEPENDENCY = "Job dependency problem"
BAD_VALUE = "Invalid argument"  # a value the command line should have refused
SITE_LIMIT = 2147483645  # SiteFactor's range: +/- (NICE_OFFSET - 3)

# the keys update takes, as the command line sends them (cli/job_update.py KEYS)
KEYS = ("TimeLimit", "Name", "Comment", "Partition", "NumNodes", "Dependency", "Priority",
        "Nice", "ArrayTaskThrottle", "StartTime", "SiteFactor")
# keys only a pending job takes: an ended one is "no longer pending" for them, as slurmctld says
PENDING_ONLY = ("StartTime", "Partition", "Dependency")


class JobUpdate:
    """One update request on the jobs it names; each field checked, then all applied."""

    def __init__(self, jobs: Reorder, settings: JobSettings, limits: RunLimits, *,
                 check: Callable[[m.SubmitJob], Any],
                 forget_dependency: Callable[[Job], None]) -> None:
        """`check`: a submission's checks (ctld/jobs/jobsubmit.py); `forget_dependency`: a
        job's dependency judged afresh (ctld/jobs/dependbook.py)."""
        self._jobs = jobs
        self._settings = settings
        self._limits = limits
        self._check = check
        self._forget_dependency = forget_dependency

    def update(self, job: Job, updates: tuple[tuple[str, str], ...], actor: Identity
               ) -> str | None:
        """Apply `updates` to `job`: None, or slurmctld's refusal (nothing of it applied, except
        where slurmctld too applies and complains: a user's lower Priority)."""
        done = job.state not in ACTIVE and job.state != PENDING
        changes: dict[str, object] = {}
        after: str | None = None  # an error slurmctld returns with the change made
        for key, value in updates:
            if key not in KEYS:
                return f"Update of this parameter is not supported: {key}={value}"
            if done and key not in PENDING_ONLY:
                return FINISHED
            if key == "TimeLimit":
                got = self._time_limit(job, value, actor, changes)
            elif key in ("Name", "Comment"):
                changes[key] = value
                got = None
            elif key in ("Partition", "NumNodes"):
                got = self._shape(job, key, value, changes)
            elif key == "Dependency":
                if job.state != PENDING:
                    got = NOT_PENDING
                elif value and dependencies.check(value):
                    got = BAD_DEPENDENCY
                else:
                    changes[key], got = value, None
            elif key == "Priority":
                got = self._priority(job, value, actor, changes)
                if got == PRIO_RESET:
                    after, got = got, None
            elif key == "Nice":
                got = self._nice(job, value, actor, changes)
            elif key == "SiteFactor":  # an operator's only (job_mgr.c update_job)
                got = _int(value, -SITE_LIMIT, SITE_LIMIT) or (None if actor.admin else DENIED)
                if got is None:
                    changes[key] = int(value)
            elif key == "ArrayTaskThrottle":
                got = _int(value, 0, None)
                if got is None:
                    changes[key] = int(value)
            else:  # StartTime: seconds since the epoch (the command line reads the forms)
                got = self._begin(job, value, changes)
            if got:
                return got
        self._apply(job, changes)
        return after

    # -- the checks ----------------------------------------------------------------------------

    def _time_limit(self, job: Job, value: str, actor: Identity, changes: dict) -> str | None:
        """A user may lower a limit; raise it only while the job pends and within its
        partition's MaxTime. `+N`/`-N` are relative (minutes, or any -t form)."""
        text = value.strip()
        sign = text[:1] if text[:1] in "+-" and text not in ("-1",) else ""
        try:
            minutes = parse_minutes(text[1:] if sign else text)
        except ValueError:
            return BAD_VALUE
        current = job.time_limit
        if sign:
            if minutes is None or current is None:
                return BAD_VALUE
            minutes = max(0, current + minutes if sign == "+" else current - minutes)
        if minutes == current:
            return None
        lower = current is None or (minutes is not None and minutes < current)
        if not (actor.admin or lower):
            pc = self._settings.config.partition(job.partition)
            max_time = pc.max_time if pc is not None else None
            if job.state != PENDING or (
                    max_time is not None and (minutes is None or minutes > max_time)):
                return DENIED
        if job.state == RUNNING:
            node = self._limits.enforced(job)
            if node is not None and (minutes is None or minutes > node):
                return RAISE_RUNNING.format(f"{node} minute(s)")
        changes["TimeLimit"] = minutes
        return None

    def _shape(self, job: Job, key: str, value: str, changes: dict) -> str | None:
        """Partition and NumNodes: a pending job's request checked again as a submission."""
        if job.state != PENDING:
            return NOT_PENDING if key == "Partition" else NOT_SUPPORTED
        req = changes.get("req", job.req)
        if key == "Partition":
            if self._settings.config.partition(value) is None:
                return BAD_PARTITION
            req = attrs.evolve(req, partition=value)
        else:
            nodes = value.split("-", 1)[0]
            if not nodes.isdigit() or int(nodes) < 1:
                return BAD_NODES
            req = attrs.evolve(req, num_nodes=int(nodes), max_nodes=None)
        checked = self._check(attrs.evolve(req, array=""))
        if isinstance(checked, m.Error):
            return BAD_PARTITION if checked.field == "partition" else PART_CONFIG
        changes["req"] = req
        changes["checked"] = checked
        return None

    def _priority(self, job: Job, value: str, actor: Identity, changes: dict) -> str | None:
        if (bad := _int(value, 0, 2**32 - 2)) is not None:
            return bad
        prio = int(value)
        if job.held:
            return HELD
        if actor.admin:
            changes["Priority"] = prio
            changes["direct"] = True  # it sticks: multifactor leaves it (direct_set_prio)
            return None
        if prio >= job.priority:
            return DENIED
        changes["Priority"] = prio
        return PRIO_RESET  # slurmctld sets it and says so (priority/basic keeps it)

    def _nice(self, job: Job, value: str, actor: Identity, changes: dict) -> str | None:
        if (bad := _int(value, -jobextras.NICE_LIMIT, jobextras.NICE_LIMIT)) is not None:
            return bad
        nice = int(value)
        if nice < 0 and not actor.admin:
            return DENIED
        changes["Nice"] = nice
        return None

    def _begin(self, job: Job, value: str, changes: dict) -> str | None:
        try:
            when = float(value)
        except ValueError:
            return BAD_VALUE
        if not 0 <= when < 1e11:
            return BAD_VALUE
        if job.state != PENDING:
            return NOT_PENDING
        changes["StartTime"] = when
        return None

    # -- applying ------------------------------------------------------------------------------

    def _apply(self, job: Job, changes: dict) -> None:
        store = self._jobs
        req = changes.get("req", job.req)
        if "Name" in changes:
            req = attrs.evolve(req, name=changes["Name"])
        if "Comment" in changes:
            req = attrs.evolve(req, comment=changes["Comment"])
        if "Dependency" in changes:
            req = attrs.evolve(req, dependency=changes["Dependency"])
            self._forget_dependency(job)
            if job.reason.startswith("Dependency"):
                job.reason = "None"
        resort = renice = False
        if "checked" in changes:
            checked = changes["checked"]
            store.repartition(job, checked.partition)
            job.need = checked.need
            job.alt_parts = checked.alt
            job.req_nodes, job.exc_nodes = checked.req_nodes, checked.exc_nodes
            if req.time_limit is None and "TimeLimit" not in changes:
                job.time_limit = checked.time_limit  # the new partition's default
        if "TimeLimit" in changes:
            if job.state == RUNNING:
                self._limits.changing(job)
            job.time_limit = changes["TimeLimit"]
            req = attrs.evolve(req, time_limit=job.time_limit, time_limit_s=None)
            self._limits.arm(job)
        if "Nice" in changes:
            nice = int(changes["Nice"])
            job.priority = max(1, job.priority + req.nice - nice)
            req = attrs.evolve(req, nice=nice)
            resort = renice = True
        if "SiteFactor" in changes:
            job.site_factor = int(changes["SiteFactor"])
            resort = renice = True  # slurmctld sets the priority again after an update
        if "Priority" in changes:
            job.priority = int(changes["Priority"])
            job.direct_prio = bool(changes.get("direct"))
            resort, renice = True, False
        if "StartTime" in changes:
            store.apply(job, je.UpdateBegin())
            req = attrs.evolve(req, begin_time=changes["StartTime"])
            job.reason = "None"  # the next pass says BeginTime again if still ahead
        if "ArrayTaskThrottle" in changes:
            throttle = int(changes["ArrayTaskThrottle"])
            for each in [j for j in store.jobs.values()
                         if job.array_job_id and j.array_job_id == job.array_job_id] or [job]:
                self._throttle(each, throttle)
        job.req = req
        if resort:  # multifactor: the new nice's priority (an admin's Priority= stays)
            store.reprioritize(job, recompute=renice and not job.direct_prio)
        store.touch(job)
        store.kick()

    def _throttle(self, job: Job, throttle: int) -> None:
        """One task's share of its array's new ArrayTaskThrottle."""
        if job.array_throttle != throttle:
            job.array_throttle = throttle
            self._jobs.touch(job)


def _int(value: str, low: int, high: int | None) -> str | None:
    try:
        n = int(value.strip())
    except ValueError:
        return BAD_VALUE
    if n < low or (high is not None and n > high):
        return BAD_VALUE
    return None


LIMIT_KIND = "limit"  # Cluster.deadlines key (job id, LIMIT_KIND): a changed limit is reached
RAISE_RUNNING = ("Ranch cannot raise a running job's time limit past the {} its node enforces "
                 "(docs/slurm-compat.md)")


class RunLimits:
    """A running job's time limit changed by rcontrol update: its node enforces the limit it
    was launched with, so rctld ends the run at the new, lower one itself (the node then ends
    it TIMEOUT, as at its own limit). Armed again after a restart from the saved record."""

    def __init__(self, jobs: JobDoor, *, clock: Callable[[], float], wall: Callable[[], float],
                 deadlines: Deadlines) -> None:
        self._jobs = jobs
        self._clock = clock
        self._wall = wall
        self._deadlines = deadlines

    def enforced(self, job: Job) -> int | None:
        """The limit (minutes) the job's node enforces."""
        return job.run_limit[0] if job.run_limit else job.time_limit

    def changing(self, job: Job) -> None:
        """Its limit is about to change while it runs: keep the node's."""
        if not job.run_limit:
            job.run_limit = (job.time_limit,)

    def arm(self, job: Job) -> None:
        key = (job.id, LIMIT_KIND)
        if job.state != RUNNING or not job.run_limit or job.time_limit is None:
            self._deadlines.cancel(key)
            return
        start = job.start_time if job.start_time is not None else self._wall()
        left = start + job.time_limit * 60.0 - self._wall()
        self._deadlines.schedule(key, self._clock() + max(0.0, left))

    def fired(self, job_id: int) -> None:
        job = self._jobs.jobs.get(job_id)
        if job is None or job.state != RUNNING or not job.run_limit or job.time_limit is None:
            return
        start = job.start_time if job.start_time is not None else self._wall()
        if start + job.time_limit * 60.0 > self._wall():
            self.arm(job)  # raised again meanwhile
            return
        logs.event("job reached its updated time limit", job=job.id, minutes=job.time_limit)
        self._jobs.kill(job, sorted(job.nodes), 0, "time limit")
