"""The power-save pass: which idle nodes power down and when (SuspendTime, the exclusions,
SuspendRate), and the keep-warm pools (`hostlist:N` of SuspendExcNodes) kept filled. The nodes'
states change only through the state machine; the programs are power save's
(ctld/nodes/powersave.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.nodes.node import NodeRecord
from ranch.ctld.nodes.powersave import Holding, RateBudget
from ranch.statemachine import events
from ranch.statemachine.model import Base, Flag
from ranch.statemachine.predicates import counts_as_warm, may_be_suspended, may_boot_for_pool

if TYPE_CHECKING:
    from ranch.ctld.nodes.ports import NodeBook


class PowerPass:
    """Suspends idle nodes past their SuspendTime, within SuspendRate (`budget`: power save's
    suspend budget) and the exclusions; powers up pool nodes."""

    def __init__(self, book: NodeBook, *, clock: Callable[[], float], wall: Callable[[], float],
                 budget: RateBudget, holding: Holding, after_change: Callable[[], None]) -> None:
        """`holding`: the jobs on the named nodes (a node holding any is never suspended);
        `after_change`: the programs and the scheduling pass the pass set off."""
        self.book = book
        self.clock = clock
        self.wall = wall
        self.budget = budget
        self.holding = holding
        self.after_change = after_change

    def suspend_time_of(self, node: NodeRecord) -> int | None:
        """Slurm's precedence: the node's own SuspendTime, else its partitions' (the largest;
        INFINITE wins), else the global one. None: never suspended automatically."""
        own = node.cfg.suspend_time
        if own is None:
            parts = [pc.suspend_time for pc in self.book.config.partitions
                     if pc.suspend_time is not None and pc.name in node.partitions]
            if parts:
                own = -1 if -1 in parts else max(parts)
        if own is None:
            return self.book.config.power.suspend_time
        return None if own < 0 else own

    def run(self) -> list[str]:
        """Suspend idle nodes past their SuspendTime (and idle nodes with a pending POWER_DOWN)
        within SuspendRate and the exclusions; keep the keep-warm pools filled; retry resumes
        that waited for ResumeRate. Returns the names it started suspending."""
        c = self.book
        p = c.config.power
        now, wall = self.clock(), self.wall()
        auto = bool(p.suspend_program)
        excluded, groups = self.exclusions()
        started: list[str] = []
        budget = self.budget
        for node in c.nodes.values():
            st = node.state
            # Slurm powers down DOWN nodes too (a dead node costs power); SuspendExcStates=DOWN
            # keeps them up for the admin.
            if not may_be_suspended(st):
                continue
            if Flag.POWER_DOWN not in st.flags:
                limit = self.suspend_time_of(node) if auto else None
                if limit is None or now - node.idle_since < limit:
                    continue
                if node.name in excluded or state_excluded(node, p.suspend_exc_states):
                    continue
                if self._holds_jobs(node.name):  # asked last: the job side's answer costs most
                    continue
                group = groups.get(node.name)
                if group is not None:
                    if group[0] <= 0:
                        continue
                    group[0] -= 1
            elif self._holds_jobs(node.name):
                continue
            if budget.available(now) < 1:
                break
            changed, _ = c.apply_event(node, events.SuspendStarted(now=wall))
            if changed:
                started.append(node.name)
                budget.take(now)
        if p.resume_program:
            self._fill_pools()
        self.after_change()
        return started

    def exclusions(self) -> tuple[set[str], dict[str, list[int]]]:
        """Nodes never suspended, and counted groups: name -> [how many more may go down].

        `hostlist:N` keeps N usable idle nodes of the set powered up, counted afresh each pass
        from the nodes in the config now, so nodes that go down, drain, take jobs, are removed
        or are added are accounted for as they come and go."""
        c = self.book
        p = c.config.power
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
            warm = sum(1 for n in members if self._warm(c.nodes[n]))
            allowance = [warm - exc.count]  # shared by the group's members
            for n in members:
                groups[n] = allowance
        return excluded, groups

    def _fill_pools(self) -> None:
        """Power up off nodes of a `hostlist:N` set that has fewer than N warm or booting."""
        c, wall = self.book, self.wall()
        for exc in c.config.power.suspend_exc_nodes:
            if exc.count is None:
                continue
            members = [c.nodes[n] for n in exc.nodes if n in c.nodes]
            have = sum(1 for n in members if self._warm(n) or self._booting_idle(n))
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

    def _holds_jobs(self, name: str) -> bool:
        """Jobs are allocated on the node (the controller's own record, not a heartbeat's)."""
        return bool(self.holding((name,)))

    def _warm(self, node: NodeRecord) -> bool:
        return counts_as_warm(node.state) and not self._holds_jobs(node.name)

    def _booting_idle(self, node: NodeRecord) -> bool:
        st = node.state
        return (Flag.POWERING_UP in st.flags and not st.cpus_alloc
                and not self._holds_jobs(node.name))


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

