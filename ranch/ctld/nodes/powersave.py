"""Power saving: SuspendRate/ResumeRate budgets, power timeouts, the resume file, and the runs
of Suspend/Resume/ResumeFailProgram with their outcome (LastPowerAction). Which idle nodes power
down and the keep-warm pools are the power-save pass's (ctld/nodes/powerpass.py). The node
states themselves change only through the state machine.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import orjson
import trio

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.deadlines import Deadlines
from ranch.ctld.nodes.node import NodeRecord
from ranch.ctld.programs import ProgramResult, run_program
from ranch.ctld.site import Site
from ranch.protocol import messages as m
from ranch.statemachine import events
from ranch.statemachine.model import Flag

if TYPE_CHECKING:
    from ranch.ctld.nodes.ports import NodeBook

# the jobs on the named nodes: (job id, its nodes), and a job's partition (the job side's)
Holding = Callable[[Sequence[str]], list[tuple[int, list[str]]]]

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
    """The controller's power-save side: the registry's power effects are routed here."""

    def __init__(self, book: NodeBook, *, clock: Callable[[], float], wall: Callable[[], float],
                 deadlines: Deadlines, site: Site, spawn: Callable[..., None] | None,
                 holding: Holding, job_partition: Callable[[int], str]) -> None:
        """`spawn` starts a program's run in the daemon's nursery (None: in-process tests, no
        programs run); `holding` and `job_partition` fill the resume file's jobs."""
        self.book = book
        self.clock = clock
        self.wall = wall
        self.deadlines = deadlines
        self.site = site
        self.spawn = spawn
        self.holding = holding
        self.job_partition = job_partition
        now = clock()
        p = book.config.power
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
        p, now = self.book.config.power, self.clock()
        self.suspend_budget.set_rate(p.suspend_rate, now)
        self.resume_budget.set_rate(p.resume_rate, now)

    def interval(self) -> float:
        """Seconds between power-save passes: SlurmctldParameters=power_save_interval=N."""
        return float(self.book.config.power.save_interval)

    async def remove_stale_files(self) -> None:
        """Resume files left by a controller killed while its program ran: that program may
        still read its file, so they go once it would have been killed (the longer timeout)."""
        if self.site.state_dir is None:
            return
        try:
            names = await trio.to_thread.run_sync(os.listdir, self.site.state_dir)
        except OSError:
            return
        stale = [os.path.join(self.site.state_dir, name) for name in names
                 if name.startswith("resume-") and name.endswith(".json")]
        if not stale:
            return
        p = self.book.config.power
        await trio.sleep(max(p.suspend_timeout, p.resume_timeout))
        await trio.to_thread.run_sync(_remove, stale)

    # -- effects from the state machine -----------------------------------------------------

    def queue(self, kind: str, node: NodeRecord) -> None:
        if kind == "suspend":
            node.power_started = self.wall()
        self.batch.setdefault(kind, []).append(node.name)

    def queue_resume(self, node: NodeRecord) -> None:
        """A node to power up: now if ResumeRate allows, else it waits (`#`, its ResumeTimeout
        not started) and the next flush or power-save pass retries."""
        if self.waiting or not self.resume_budget.take(self.clock()):
            self.waiting[node.name] = None
            node.power_started = None
            node.power_action = {"action": "resume", "rc": None, "time": self.wall(),
                                 "waiting": True}
            self.book.mark_changed(node)
            return
        node.power_started = self.wall()
        self.batch.setdefault("resume", []).append(node.name)

    def schedule_timeout(self, node: NodeRecord, kind: str) -> None:
        """ScheduleTimeout: a waiting resume gets its ResumeTimeout when its program starts."""
        if kind == "resume" and node.name in self.waiting:
            return
        p = self.book.config.power
        delay = p.suspend_timeout if kind == "suspend" else p.resume_timeout
        self.deadlines.schedule((node.name, kind), self.clock() + delay)

    def release_waiting(self) -> None:
        now = self.clock()
        while self.waiting:
            name = next(iter(self.waiting))
            node = self.book.nodes.get(name)
            if node is None or Flag.POWERING_UP not in node.state.flags:
                del self.waiting[name]  # registered, downed or removed meanwhile
                continue
            if not self.resume_budget.take(now):
                return
            del self.waiting[name]
            node.power_started = self.wall()
            self.batch.setdefault("resume", []).append(name)
            self.schedule_timeout(node, "resume")

    def fired(self, node: NodeRecord, kind: str) -> None:
        """A power timeout came (the deadline task): the program did not finish in time."""
        flags = node.state.flags
        if kind == "suspend" and Flag.POWERING_DOWN in flags:
            self.book.apply_event(node, events.SuspendTimeout(now=self.wall()))
        elif kind == "resume" and Flag.POWERING_UP in flags:
            self.book.apply_event(node, events.ResumeTimeout(now=self.wall()))

    # -- deadlines across restarts and reconfigures ----------------------------------------

    def rearm(self) -> None:
        """Re-arm SuspendTimeout/ResumeTimeout of nodes caught mid-transition (controller
        restart, reconfigure) from when their program started, not from now: a controller
        stop no longer costs a booting node a full extra ResumeTimeout."""
        p = self.book.config.power
        now, wall = self.clock(), self.wall()
        for node in self.book.nodes.values():
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
            self.deadlines.schedule((node.name, kind),
                                      now + max(0.0, limit - max(0.0, wall - started)))

    # -- running the programs --------------------------------------------------------------

    def flush(self) -> None:
        """Start the programs the last operation asked for, one run per kind (batched)."""
        if self.waiting:
            self.release_waiting()
        if not self.batch:
            return  # the common case (every heartbeat asks)
        batch, self.batch = self.batch, {}
        c = self.book
        p = c.config.power
        for kind, node_names in batch.items():
            program = getattr(p, PROGRAM_OF[kind])
            folded = hostlist.fold(node_names)
            if not program:
                logs.event("no program configured; nothing run", kind=kind, nodes=folded)
                continue
            if self.spawn is None:
                logs.event("no runner; program not started", logging.WARNING, kind=kind,
                           nodes=folded)
                continue
            wall = self.wall()
            for name in node_names:
                node = c.nodes.get(name)
                if node is not None:
                    node.power_action = {"action": ACTION_OF[kind], "rc": None, "time": wall,
                                         "running": True}
                    c.mark_changed(node)
            self.spawn(self.run_batch, kind, program, folded, tuple(node_names))

    async def run_batch(self, kind: str, program: str, folded: str,
                        node_names: tuple[str, ...]) -> ProgramResult:
        """One program run; the resume file lives until the program ends."""
        p = self.book.config.power
        env: dict[str, str] = {}
        if self.site.server_addr:
            env["RANCH_SERVER"] = self.site.server_addr
        if self.site.key_file:
            env["RANCH_KEY_FILE"] = self.site.key_file
        if self.site.state_dir:
            env["RANCH_STATE_DIR"] = self.site.state_dir
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
            result = await run_program(kind, program, folded, conf_path=self.book.config.path,
                                       timeout=max(p.suspend_timeout, p.resume_timeout),
                                       env=env)
        finally:
            if path is not None:
                with trio.CancelScope(shield=True):  # also when the controller is stopping
                    await trio.to_thread.run_sync(_remove, [path])
        self.done(kind, node_names, result)
        return result

    def done(self, kind: str, node_names: tuple[str, ...], result: ProgramResult) -> None:
        wall = self.wall()
        action: dict[str, Any] = {"action": ACTION_OF[kind], "rc": result.returncode,
                                  "time": wall}
        if result.timed_out:
            action["error"] = "killed at timeout"
        elif result.error:
            action["error"] = result.error
        for name in node_names:
            node = self.book.nodes.get(name)
            if node is not None:
                node.power_action = dict(action)
                self.book.mark_changed(node)

    def resume_doc(self, node_names: list[str]) -> dict[str, Any]:
        """Slurm's SLURM_RESUME_FILE document, plus the issue's `all_nodes` and per-job `nodes`."""
        resuming = set(node_names)
        jobs: list[dict[str, Any]] = []
        for job_id, job_nodes in self.holding(list(node_names)):
            alloc = hostlist.fold(list(job_nodes))
            jobs.append({
                "job_id": int(job_id),
                "nodes_alloc": alloc,
                "nodes_resume": hostlist.fold([n for n in job_nodes if n in resuming]),
                "nodes": alloc,
                "features": "",
                "partition": self.job_partition(job_id),
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
        if self.site.state_dir is None:
            fd, path = tempfile.mkstemp(prefix="resume-", suffix=".json")
        else:
            self._files += 1
            path = os.path.join(self.site.state_dir, f"resume-{os.getpid()}-{self._files}.json")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return path

    # -- rcontrol show config --------------------------------------------------------------

    def config_dump(self, dump: m.ConfigDump) -> m.ConfigDump:
        """The config listing with the rates' current budgets."""
        now = self.clock()
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
