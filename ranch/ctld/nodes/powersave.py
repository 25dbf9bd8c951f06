"""Power saving: which idle nodes power down and when, SuspendRate/ResumeRate budgets, the
keep-warm pool, the resume file, and the runs of Suspend/Resume/ResumeFailProgram with their
outcome (LastPowerAction). The node states themselves change only through the state machine.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from typing import TYPE_CHECKING, Any

import attrs
import orjson
import trio

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.nodes.node import NodeRecord
from ranch.ctld.programs import ProgramResult, run_program
from ranch.protocol import messages as m
from ranch.statemachine import events
from ranch.statemachine.model import Base, Flag
from ranch.statemachine.predicates import counts_as_warm, may_be_suspended, may_boot_for_pool

if TYPE_CHECKING:
    from ranch.ctld.ports import Registry

PROGRAM_OF = {"suspend": "suspend_program", "resume": "resume_program",
              "resume_fail": "resume_fail_program"}
ACTION_OF = {"suspend": "suspend", "resume": "resume", "resume_fail": "resume_fail"}


class RateBudget:
    """A token bucket of `rate` nodes a minute: refills continuously, banks at most one minute's
    worth, so a burst after a quiet spell is `rate` nodes and the long-run pace is `rate`/min.
    rate 0 = unlimited."""

    def __init__(self, rate: int, now: float) -> None:
        self.rate = rate
        self.tokens = float(rate)
        self.at = now

    def available(self, now: float) -> float:
        if self.rate <= 0:
            return math.inf
        self.tokens = min(float(self.rate), self.tokens + (now - self.at) * self.rate / 60.0)
        self.at = now
        return math.floor(self.tokens + 1e-9)

    def set_rate(self, rate: int, now: float) -> None:
        """A new rate keeps the tokens already banked (never more than a minute's)."""
        self.available(now)
        self.rate = rate
        self.tokens = min(self.tokens, float(rate)) if rate > 0 else 0.0

    def take(self, now: float) -> bool:
        if self.available(now) < 1:
            return False
        if self.rate > 0:
            self.tokens -= 1.0
        return True

    def describe(self, now: float) -> str:
        if self.rate <= 0:
            return "0 nodes/min (unlimited)"
        return f"{self.rate} nodes/min (budget {int(self.available(now))} now)"


class PowerSave:
    """The controller's power-save side; Cluster routes the power effects here."""

    def __init__(self, cluster: Registry) -> None:
        self.c = cluster
        now = cluster.clock()
        p = cluster.config.power
        self.suspend_budget = RateBudget(p.suspend_rate, now)
        self.resume_budget = RateBudget(p.resume_rate, now)
        self.batch: dict[str, list[str]] = {}  # kind -> node names, run at the next flush
        self.waiting: dict[str, None] = {}  # resumes held back by ResumeRate, oldest first
        self._files = 0

    @property
    def pending(self) -> bool:
        return bool(self.batch) or bool(self.waiting)

    def use_config(self) -> None:
        """Reconfigure: new rates keep the tokens already banked (never more than a minute's)."""
        p, now = self.c.config.power, self.c.clock()
        self.suspend_budget.set_rate(p.suspend_rate, now)
        self.resume_budget.set_rate(p.resume_rate, now)

    def interval(self) -> float:
        """Seconds between power-save passes: SlurmctldParameters=power_save_interval=N."""
        return float(self.c.config.power.save_interval)

    async def remove_stale_files(self) -> None:
        """Resume files left by a controller killed while its program ran: that program may
        still read its file, so they go once it would have been killed (the longer timeout)."""
        if self.c.site.state_dir is None:
            return
        try:
            names = await trio.to_thread.run_sync(os.listdir, self.c.site.state_dir)
        except OSError:
            return
        stale = [os.path.join(self.c.site.state_dir, name) for name in names
                 if name.startswith("resume-") and name.endswith(".json")]
        if not stale:
            return
        p = self.c.config.power
        await trio.sleep(max(p.suspend_timeout, p.resume_timeout))
        await trio.to_thread.run_sync(_remove, stale)

    # -- effects from the state machine -----------------------------------------------------

    def queue(self, kind: str, node: NodeRecord) -> None:
        if kind == "suspend":
            node.power_started = self.c.wall()
        self.batch.setdefault(kind, []).append(node.name)

    def queue_resume(self, node: NodeRecord) -> None:
        """A node to power up: now if ResumeRate allows, else it waits (`#`, its ResumeTimeout
        not started) and the next flush or power-save pass retries."""
        if self.waiting or not self.resume_budget.take(self.c.clock()):
            self.waiting[node.name] = None
            node.power_started = None
            node.power_action = {"action": "resume", "rc": None, "time": self.c.wall(),
                                 "waiting": True}
            self.c.mark_changed(node)
            return
        node.power_started = self.c.wall()
        self.batch.setdefault("resume", []).append(node.name)

    def schedule_timeout(self, node: NodeRecord, kind: str) -> None:
        """ScheduleTimeout: a waiting resume gets its ResumeTimeout when its program starts."""
        if kind == "resume" and node.name in self.waiting:
            return
        p = self.c.config.power
        delay = p.suspend_timeout if kind == "suspend" else p.resume_timeout
        self.c.deadlines.schedule((node.name, kind), self.c.clock() + delay)

    def release_waiting(self) -> None:
        now = self.c.clock()
        while self.waiting:
            name = next(iter(self.waiting))
            node = self.c.nodes.get(name)
            if node is None or Flag.POWERING_UP not in node.state.flags:
                del self.waiting[name]  # registered, downed or removed meanwhile
                continue
            if not self.resume_budget.take(now):
                return
            del self.waiting[name]
            node.power_started = self.c.wall()
            self.batch.setdefault("resume", []).append(name)
            self.schedule_timeout(node, "resume")

    # -- deadlines across restarts and reconfigures ----------------------------------------

    def rearm(self) -> None:
        """Re-arm SuspendTimeout/ResumeTimeout of nodes caught mid-transition (controller
        restart, reconfigure) from when their program started, not from now: a controller
        stop no longer costs a booting node a full extra ResumeTimeout."""
        p = self.c.config.power
        now, wall = self.c.clock(), self.c.wall()
        for node in self.c.nodes.values():
            flags = node.state.flags
            if Flag.POWERING_DOWN in flags:
                kind, limit = "suspend", p.suspend_timeout
            elif Flag.POWERING_UP in flags:
                kind, limit = "resume", p.resume_timeout
                if node.power_started is None:  # it was waiting for ResumeRate
                    self.waiting.setdefault(node.name, None)
                    continue
            else:
                continue
            started = node.power_started if node.power_started is not None else wall
            self.c.deadlines.schedule((node.name, kind),
                                      now + max(0.0, limit - max(0.0, wall - started)))

    # -- the power-save pass ---------------------------------------------------------------

    def suspend_time_of(self, node: NodeRecord) -> int | None:
        """Slurm's precedence: the node's own SuspendTime, else its partitions' (the largest;
        INFINITE wins), else the global one. None: never suspended automatically."""
        own = node.cfg.suspend_time
        if own is None:
            parts = [pc.suspend_time for pc in self.c.config.partitions
                     if pc.suspend_time is not None and pc.name in node.partitions]
            if parts:
                own = -1 if -1 in parts else max(parts)
        if own is None:
            return self.c.config.power.suspend_time
        return None if own < 0 else own

    def power_save_pass(self) -> list[str]:
        """Suspend idle nodes past their SuspendTime (and idle nodes with a pending POWER_DOWN)
        within SuspendRate and the exclusions; keep the keep-warm pools filled; retry resumes
        that waited for ResumeRate. Returns the names it started suspending."""
        c = self.c
        p = c.config.power
        now, wall = c.clock(), c.wall()
        auto = bool(p.suspend_program)
        excluded, groups = self.exclusions()
        started: list[str] = []
        budget = self.suspend_budget
        for node in c.nodes.values():
            st = node.state
            # Slurm powers down DOWN nodes too (a dead node costs power); SuspendExcStates=DOWN
            # keeps them up for the admin.
            if not may_be_suspended(st) or _holds_jobs(c, node.name):
                continue
            if Flag.POWER_DOWN not in st.flags:
                limit = self.suspend_time_of(node) if auto else None
                if limit is None or now - node.idle_since < limit:
                    continue
                if node.name in excluded or state_excluded(node, p.suspend_exc_states):
                    continue
                group = groups.get(node.name)
                if group is not None:
                    if group[0] <= 0:
                        continue
                    group[0] -= 1
            if budget.available(now) < 1:
                break
            changed, _ = c.apply_event(node, events.SuspendStarted(now=wall))
            if changed:
                started.append(node.name)
                budget.take(now)
        if p.resume_program:
            self._fill_pools()
        c.flush_programs()
        return started

    def exclusions(self) -> tuple[set[str], dict[str, list[int]]]:
        """Nodes never suspended, and counted groups: name -> [how many more may go down].

        `hostlist:N` keeps N usable idle nodes of the set powered up, counted afresh each pass
        from the nodes in the config now, so nodes that go down, drain, take jobs, are removed
        or are added are accounted for as they come and go."""
        c, p = self.c, self.c.config.power
        excluded: set[str] = set()
        for part in p.suspend_exc_parts:
            pc = c.config.partition(part)
            if pc is not None:
                excluded.update(pc.nodes)
        groups: dict[str, list[int]] = {}
        for exc in p.suspend_exc_nodes:
            members = [n for n in exc.nodes if n in c.nodes]
            if exc.count is None:
                excluded.update(members)
                continue
            warm = sum(1 for n in members if _warm(c, c.nodes[n]))
            allowance = [warm - exc.count]  # shared by the group's members
            for n in members:
                groups[n] = allowance
        return excluded, groups

    def _fill_pools(self) -> None:
        """Power up off nodes of a `hostlist:N` set that has fewer than N warm or booting."""
        c, wall = self.c, self.c.wall()
        for exc in c.config.power.suspend_exc_nodes:
            if exc.count is None:
                continue
            members = [c.nodes[n] for n in exc.nodes if n in c.nodes]
            have = sum(1 for n in members if _warm(c, n) or _booting_idle(c, n))
            for node in members:
                if have >= exc.count:
                    break
                st = node.state
                if may_boot_for_pool(st):
                    changed, _ = c.apply_event(node, events.ResumeStarted(now=wall))
                    if changed:
                        have += 1
                        logs.event("keep-warm pool below its count; powering up", node=node.name,
                                   pool=hostlist.fold(exc.nodes), count=exc.count)

    # -- running the programs --------------------------------------------------------------

    def flush(self) -> None:
        """Start the programs the last operation asked for, one run per kind (batched)."""
        if self.waiting:
            self.release_waiting()
        batch, self.batch = self.batch, {}
        c = self.c
        p = c.config.power
        for kind, node_names in batch.items():
            program = getattr(p, PROGRAM_OF[kind])
            folded = hostlist.fold(node_names)
            if not program:
                logs.event("no program configured; nothing run", kind=kind, nodes=folded)
                continue
            if c.spawn is None:
                logs.event("no runner; program not started", logging.WARNING, kind=kind,
                           nodes=folded)
                continue
            wall = c.wall()
            for name in node_names:
                node = c.nodes.get(name)
                if node is not None:
                    node.power_action = {"action": ACTION_OF[kind], "rc": None, "time": wall,
                                         "running": True}
                    c.mark_changed(node)
            c.spawn(self.run_batch, kind, program, folded, tuple(node_names))

    async def run_batch(self, kind: str, program: str, folded: str,
                        node_names: tuple[str, ...]) -> ProgramResult:
        """One program run; the resume file lives until the program ends."""
        p = self.c.config.power
        env: dict[str, str] = {}
        if self.c.site.server_addr:
            env["RANCH_SERVER"] = self.c.site.server_addr
        if self.c.site.key_file:
            env["RANCH_KEY_FILE"] = self.c.site.key_file
        if self.c.site.state_dir:
            env["RANCH_STATE_DIR"] = self.c.site.state_dir
        path = None
        if kind == "resume":
            try:
                data = orjson.dumps(self.resume_doc(list(node_names)),
                                    option=orjson.OPT_INDENT_2)
                path = await trio.to_thread.run_sync(self.write_resume_file, data)
                env["SLURM_RESUME_FILE"] = path
            except OSError as exc:
                logs.event("cannot write the resume file; ResumeProgram runs without it",
                           logging.ERROR, nodes=folded, error=str(exc))
        try:
            result = await run_program(kind, program, folded, conf_path=self.c.config.path,
                                       timeout=max(p.suspend_timeout, p.resume_timeout),
                                       env=env)
        finally:
            if path is not None:
                with trio.CancelScope(shield=True):  # also when the controller is stopping
                    await trio.to_thread.run_sync(_remove, [path])
        self.done(kind, node_names, result)
        return result

    def done(self, kind: str, node_names: tuple[str, ...], result: ProgramResult) -> None:
        wall = self.c.wall()
        action: dict[str, Any] = {"action": ACTION_OF[kind], "rc": result.returncode,
                                  "time": wall}
        if result.timed_out:
            action["error"] = "killed at timeout"
        elif result.error:
            action["error"] = result.error
        for name in node_names:
            node = self.c.nodes.get(name)
            if node is not None:
                node.power_action = dict(action)
                self.c.mark_changed(node)

    def resume_doc(self, node_names: list[str]) -> dict[str, Any]:
        """Slurm's SLURM_RESUME_FILE document, plus the issue's `all_nodes` and per-job `nodes`."""
        resuming = set(node_names)
        jobs: list[dict[str, Any]] = []
        for job_id, job_nodes in self.c.jobs.jobs_holding(list(node_names)):
            alloc = hostlist.fold(list(job_nodes))
            jobs.append({
                "job_id": int(job_id),
                "nodes_alloc": alloc,
                "nodes_resume": hostlist.fold([n for n in job_nodes if n in resuming]),
                "nodes": alloc,
                "features": "",
                "partition": self.c.jobs.store.jobs[job_id].partition,
                "reservation": "",
                "exclusive": False,
                "oversubscribe": "NO",
                "extra": "",
            })
        folded = hostlist.fold(node_names)
        return {"all_nodes_resume": folded, "all_nodes": folded, "jobs": jobs}

    def write_resume_file(self, data: bytes) -> str:
        """In a worker thread: SLURM_RESUME_FILE's `data`, mode 0600 in the state directory (a
        private temp file without one); the caller removes it when the program has ended."""
        if self.c.site.state_dir is None:
            fd, path = tempfile.mkstemp(prefix="resume-", suffix=".json")
        else:
            self._files += 1
            path = os.path.join(self.c.site.state_dir, f"resume-{os.getpid()}-{self._files}.json")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return path

    # -- rcontrol show config --------------------------------------------------------------

    def config_dump(self, dump: m.ConfigDump) -> m.ConfigDump:
        """The config listing with the rates' current budgets."""
        now = self.c.clock()
        shown = {"SuspendRate": self.suspend_budget.describe(now),
                 "ResumeRate": self.resume_budget.describe(now)}
        items = tuple((k, shown.get(k, v)) for k, v in dump.items)
        return attrs.evolve(dump, items=items)


def _remove(paths: list[str]) -> None:
    """In a worker thread: unlink what is still there."""
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass


def _holds_jobs(c: Registry, name: str) -> bool:
    """Jobs are allocated on the node (the controller's own record, not a heartbeat's)."""
    use = c.jobs.store.uses.get(name)
    return bool(use and use.jobs)


def _warm(c: Registry, node: NodeRecord) -> bool:
    st = node.state
    return counts_as_warm(st) and not _holds_jobs(c, node.name)


def _booting_idle(c: Registry, node: NodeRecord) -> bool:
    st = node.state
    return Flag.POWERING_UP in st.flags and not st.cpus_alloc and not _holds_jobs(c, node.name)


def state_excluded(node: NodeRecord, exc_states: tuple[str, ...]) -> bool:
    """SuspendExcStates: is the node in one of the listed states?"""
    st = node.state
    for word in exc_states:
        w = word.upper()
        if w == "DOWN" and st.base == Base.DOWN:
            return True
        if w in ("NOT_RESPONDING", "NO_RESPOND") and Flag.NO_RESPOND in st.flags:
            return True
        if w == "CLOUD" and (node.cfg.state == "CLOUD" or Flag.CLOUD in st.flags):
            return True
        flag = Flag.__members__.get(w)
        if flag is not None and flag in st.flags:
            return True
    return False

