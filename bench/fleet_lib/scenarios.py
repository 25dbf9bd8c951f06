"""One benchmark run against a controller: the registration storm, a steady window, then the
scenario's extra phases (CLI timings, an admin update, churn, a mass failure). Returns figures."""

from __future__ import annotations

import contextlib
import gc
import math
import os
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import trio

from fleet_lib import follower, observe, profile
from fleet_lib.config import hostlist
from fleet_lib.controller import REPO_ROOT, Controller
from fleet_lib.simnode import Fleet
from fleet_lib.stats import CpuWindow, peak_rss_mb, percentile, rounded, rss_mb
from ranch.protocol import client, typedclient
from ranch.protocol.messages import GetSnapshot, UpdateNodes, UpdateResult

SCENARIOS = ("steady", "storm", "mass-failure", "churn", "admin-update", "cli", "all")


@attrs.frozen
class RunSpec:
    nodes: int
    interval: float
    duration: float  # seconds of the steady window
    scenario: str = "steady"
    churn: float = 0.0  # leaves per second
    kill: int = 0
    slurmd_timeout: float = 30.0
    admin_nodes: int = 1000
    cli_runs: int = 3
    storm_timeout: float = 120.0
    profile_dir: Path | None = None  # py-spy rctld during the storm, steady and admin phases
    # Event log (issue 13): admin DRAIN/UNDRAIN requests per second during the steady window
    # (each changes event_churn_nodes nodes), and a --follow client that never reads.
    event_churn: float = 0.0
    event_churn_nodes: int = 50
    stalled_follower: bool = False


def ms(value: float | None) -> float | None:
    return rounded(None if value is None else value * 1000, 2)


class Run:
    def __init__(self, spec: RunSpec, ctl: Controller, fleet: Fleet) -> None:
        self.spec = spec
        self.ctl = ctl
        self.fleet = fleet
        self.fig: dict = {
            "nodes": spec.nodes, "interval_s": spec.interval, "scenario": spec.scenario,
            "slurmd_timeout_s": spec.slurmd_timeout, "steady_window_s": spec.duration,
        }  # fmt: skip
        self.rss_max: dict[str, float] = {"ctld": 0.0, "sim": 0.0}
        self.sampling_steady = False
        self.rss_steady_max = 0.0
        self.windows: dict[str, tuple[float, float]] = {}  # phase -> (wall began, ended)

    @property
    def addr(self) -> tuple[str, int]:
        return self.ctl.addr

    async def main(self) -> dict:
        spec = self.spec
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._sample_rss)
            async with self._profiled("storm"):
                await self._storm(nursery)
            await trio.sleep(min(spec.interval, 5.0))  # let post-storm work (state save) finish
            churn_now = spec.scenario == "churn" and spec.churn > 0
            async with self._profiled("steady"):
                await self._steady(nursery, churn_now)
            if spec.scenario in ("cli", "all"):
                await self._cli()
            if spec.scenario in ("admin-update", "all"):
                async with self._profiled("admin"):
                    await self._admin_update()
            if spec.scenario == "all" and spec.churn > 0:
                await self._churn_phase(min(spec.duration, 30.0))
            if spec.kill > 0 and spec.scenario in ("mass-failure", "all"):
                await self._mass_failure()
            await self._final_check()
            nursery.cancel_scope.cancel()
        self._state_save_figures()
        self._finish()
        return self.fig

    @contextlib.asynccontextmanager
    async def _profiled(self, phase: str) -> AsyncIterator[None]:
        """The phase sampled with py-spy (--profile-ctld), and its wall-clock window kept in
        `windows` (--loop-steps files rctld's long steps by it)."""
        began = time.time()
        try:
            async with profile.sampled(self.ctl.pid, self.spec.profile_dir, phase):
                yield
        finally:
            self.windows[phase] = (began, time.time())

    # -- phases --------------------------------------------------------------------------------

    async def _storm(self, nursery: trio.Nursery) -> None:
        fleet, spec = self.fleet, self.spec
        t0 = fleet.start(nursery)
        waits: list[float] = []
        with trio.move_on_after(spec.storm_timeout):
            async with trio.open_nursery() as probing:
                probing.start_soon(self._command_probe, waits)
                await fleet.all_registered.wait()
                probing.cancel_scope.cancel()
        # rinfo's request (the node names and states) while the nodes register: answered?
        self.fig["storm_commands"] = len(waits)
        self.fig["storm_command_max_s"] = rounded(max(waits, default=None))
        self.fig["registered"] = fleet.registered
        self.fig["storm_registered_s"] = rounded(fleet.last_register_at - t0)
        self.fig["register_p50_ms"] = ms(percentile(fleet.register_rtts, 50))
        self.fig["register_p99_ms"] = ms(percentile(fleet.register_rtts, 99))
        names = [n.name for n in fleet.nodes]
        ok, snap = await observe.wait_for(
            self.addr, self.ctl.key,
            lambda s, _at: len(observe.names_where(s, observe.idle, names)) == len(names),
            timeout=max(5.0, spec.storm_timeout - (time.perf_counter() - t0)), gap=0.25,
        )  # fmt: skip
        self.fig["storm_s"] = rounded(time.perf_counter() - t0) if ok else None
        # The fleet's objects live for the whole run: keep the collector from walking them.
        gc.collect()
        gc.freeze()
        if snap is not None:
            self.fig["storm_idle"] = len(observe.names_where(snap, observe.idle, names))

    async def _command_probe(self, waits: list[float]) -> None:
        """A command every second while the storm lasts; each one's wait for its reply
        (math.inf when none came within 60 s)."""
        def ask() -> None:
            typedclient.request(self.addr, self.ctl.key,
                           GetSnapshot(fields=("name", "state", "partitions")), timeout=60)

        while True:
            started = time.perf_counter()
            try:
                await trio.to_thread.run_sync(ask, abandon_on_cancel=True)
                waits.append(time.perf_counter() - started)
            except (client.ControllerUnreachable, OSError):
                waits.append(math.inf)
            await trio.sleep(1.0)

    async def _steady(self, nursery: trio.Nursery, churn: bool) -> None:
        fleet, spec = self.fleet, self.spec
        cpu_ctld = CpuWindow(self.ctl.pid) if self.ctl.pid else None
        cpu_sim = CpuWindow(os.getpid())
        fleet.open_window()
        tag = fleet.window
        for w in (cpu_ctld, cpu_sim):
            if w is not None:
                w.start()
        self.sampling_steady = True
        t0 = time.perf_counter()
        churn_scope = trio.CancelScope()
        if churn:
            nursery.start_soon(self._churn, churn_scope)
        stalled = None
        if spec.stalled_follower:
            stalled = follower.open_stalled(self.addr, self.ctl.key)
        events_scope = trio.CancelScope()
        churned = [0]
        if spec.event_churn > 0:
            count = min(spec.event_churn_nodes, spec.nodes)
            expr = hostlist(spec.nodes - count + 1, spec.nodes, spec.nodes)

            async def churn_events() -> None:
                with events_scope:
                    await follower.event_churn(self.addr, self.ctl.key, expr, spec.event_churn,
                                               churned)

            nursery.start_soon(churn_events)
        await trio.sleep(spec.duration)
        churn_scope.cancel()
        events_scope.cancel()
        if spec.event_churn > 0:
            self.fig["event_churn_requests"] = churned[0]
            self.fig["event_churn_events_per_s"] = rounded(
                churned[0] * min(spec.event_churn_nodes, spec.nodes) / spec.duration, 1)
        if stalled is not None:
            got, missed = await trio.to_thread.run_sync(follower.drain_stalled, stalled,
                                                        self.ctl.key)
            self.fig.update(stalled_follower=True, stalled_follower_got=got,
                            stalled_follower_missed=missed)
        wall = time.perf_counter() - t0
        fleet.close_window()
        self.sampling_steady = False
        self.fig["ctld_cpu_pct"] = rounded(cpu_ctld.stop(), 1) if cpu_ctld else None
        self.fig["sim_cpu_pct"] = rounded(cpu_sim.stop(), 1)
        self.fig["heartbeats_per_s"] = rounded(fleet.hb_replied / wall, 1)
        self.fig["hb_p50_ms"] = ms(percentile(fleet.hb_rtts, 50))
        self.fig["hb_p99_ms"] = ms(percentile(fleet.hb_rtts, 99))
        self.fig["hb_max_ms"] = ms(max(fleet.hb_rtts, default=None))
        self.fig["ctld_rss_steady_mb"] = rounded(self.rss_steady_max, 1)
        sent, replied = fleet.hb_sent, fleet.hb_replied
        with trio.move_on_after(min(spec.interval, 5.0)):
            while fleet.unanswered(tag):
                await trio.sleep(0.1)
        lost = fleet.unanswered(tag) + fleet.hb_lost
        self.fig.update(hb_sent=sent, hb_replied=replied, hb_lost=lost,
                        hb_late=max(0, sent - replied - lost),
                        expected_hb_per_s=rounded(spec.nodes / spec.interval, 1))  # fmt: skip

    async def _cli(self) -> None:
        env = observe.cli_env(str(REPO_ROOT), self.addr, self.ctl.key_path or "")
        py = observe.python()
        runs = self.spec.cli_runs
        # RANCH_SERVER and RANCH_KEY_FILE (in env) tell the commands where and how to ask.
        for key, argv in (
            ("rinfo", [py, "-m", "ranch.cli.rinfo"]),
            ("rinfo_N", [py, "-m", "ranch.cli.rinfo", "-N"]),
            ("rcontrol_show_node", [py, "-m", "ranch.cli.rcontrol", "show", "node"]),
        ):
            res = await observe.time_command(argv, env, runs)
            if res["ok"]:
                self.fig[f"{key}_s"] = rounded(res["median"])
                self.fig[f"{key}_max_s"] = rounded(res["max"])
                self.fig[f"{key}_bytes"] = res["bytes"]
            else:
                self.fig[f"{key}_s"] = None
                self.fig[f"{key}_error"] = f"exit {res['status']}: {res['stderr']}"
        t0 = time.perf_counter()
        await observe.snapshot(self.addr, self.ctl.key)
        self.fig["snapshot_request_s"] = rounded(time.perf_counter() - t0)

    async def _admin_update(self) -> None:
        count = min(self.spec.admin_nodes, self.spec.nodes)
        expr = hostlist(1, count, self.spec.nodes)
        key = self.ctl.key

        def update(state: str, reason: str | None) -> tuple[float, object]:
            msg = UpdateNodes(node_names=expr, state=state, reason=reason, user="fleetbench")
            t0 = time.perf_counter()
            reply = typedclient.request(self.addr, key, msg, timeout=60.0)
            return time.perf_counter() - t0, reply

        wall, reply = await trio.to_thread.run_sync(update, "DRAIN", "fleet bench admin update")
        self.fig["admin_update_nodes"] = count
        self.fig["admin_update_s"] = rounded(wall)
        if isinstance(reply, UpdateResult):
            self.fig["admin_update_changed"] = len(reply.changed)
            if reply.errors:
                self.fig["admin_update_errors"] = list(reply.errors[:3])
        else:
            self.fig["admin_update_error"] = repr(reply)[:200]
        wall, reply = await trio.to_thread.run_sync(update, "RESUME", None)
        self.fig["admin_resume_s"] = rounded(wall)
        if isinstance(reply, UpdateResult):
            self.fig["admin_resume_changed"] = len(reply.changed)

    async def _churn(self, scope: trio.CancelScope) -> None:
        fleet, rate = self.fleet, self.spec.churn
        leaves = 0
        with scope:
            next_at = trio.current_time()
            while True:
                next_at += 1.0 / rate
                await trio.sleep_until(next_at)
                candidates = [n for n in fleet.nodes
                              if n.registered and not n.killed and n.leaving is None]  # fmt: skip
                if not candidates:
                    continue
                node = fleet.rnd.choice(candidates)
                node.leave("graceful" if leaves % 2 else "abrupt")
                leaves += 1
                self.fig["churn_leaves"] = leaves

    async def _churn_phase(self, seconds: float) -> None:
        scope = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._churn, scope)
            await trio.sleep(seconds)
            scope.cancel()

    async def _mass_failure(self) -> None:
        fleet, spec = self.fleet, self.spec
        candidates = [n for n in fleet.nodes if n.registered and not n.churned]
        victims = fleet.rnd.sample(candidates, min(spec.kill, len(candidates)))
        for node in victims:
            node.kill()
        names = {n.name for n in victims}
        by_name = {n.name: n for n in victims}
        t_kill = time.time()
        first_noresp: dict[str, float] = {}
        first_down: dict[str, float] = {}

        def done(snap, at: float) -> bool:
            for n in snap.nodes:
                name = n["name"]
                if name in names:
                    if observe.no_respond(n) or observe.down(n):
                        first_noresp.setdefault(name, at)
                    if observe.down(n):
                        first_down.setdefault(name, at)
                elif not by_name.get(name) and (observe.no_respond(n) or observe.down(n)):
                    self._note_false(name)
            return len(first_down) == len(names)

        # No victim can be NO_RESPOND before one interval after the kill; do not load the
        # controller with snapshots before then.
        await trio.sleep(max(0.0, spec.interval - 1.0))
        ok, snap = await observe.wait_for(
            self.addr, self.ctl.key, done,
            timeout=spec.slurmd_timeout + 2 * spec.interval + 30, gap=0.25,
        )  # fmt: skip
        self.fig["killed"] = len(victims)
        self.fig["killed_down"] = len(first_down)
        lags, noresp_lags, observed = [], [], []
        records = {n["name"]: n for n in snap.nodes} if snap is not None else {}
        for name in names:
            rec = records.get(name, {})
            last = rec.get("last_heartbeat") or by_name[name].last_beat_wall
            rtime = observe.reason_time(rec) if observe.down(rec) else None
            if rtime is not None:
                lags.append(rtime - (last + spec.slurmd_timeout))
            if name in first_down:
                observed.append(first_down[name] - (last + spec.slurmd_timeout))
            if name in first_noresp:
                noresp_lags.append(first_noresp[name] - (last + 2 * spec.interval))
        self.fig["detect_lag_s"] = rounded(max(lags or observed or [None]))  # type: ignore[type-var]
        self.fig["detect_lag_observed_s"] = rounded(max(observed, default=None))
        self.fig["noresp_lag_observed_s"] = rounded(max(noresp_lags, default=None))
        self.fig["detect_all_down_after_kill_s"] = (
            rounded(max(first_down.values()) - t_kill) if ok and first_down else None
        )

    async def _final_check(self) -> None:
        try:
            snap, _ = await observe.snapshot(self.addr, self.ctl.key)
        except Exception as exc:
            self.fig["final_snapshot_error"] = str(exc)[:200]
            return
        for n in snap.nodes:
            if observe.no_respond(n) or observe.down(n):
                self._note_false(n["name"])
        churned = [n.name for n in self.fleet.nodes if n.churned and not n.killed]
        if churned:
            idle = observe.names_where(snap, observe.idle, churned)
            self.fig["churn_not_idle_at_end"] = len(churned) - len(idle)

    def _note_false(self, name: str) -> None:
        node = self._node(name)
        if node is not None and node.ever_registered and not node.killed and not node.churned:
            self.fleet.false_down.add(name)

    def _node(self, name: str):
        m_ = re.search(r"(\d+)$", name)
        if not m_:
            return None
        i = int(m_.group(1))
        return self.fleet.nodes[i - 1] if 0 < i <= len(self.fleet.nodes) else None

    # -- figures -------------------------------------------------------------------------------

    async def _sample_rss(self) -> None:
        me = os.getpid()
        while True:
            if self.ctl.pid:
                r = rss_mb(self.ctl.pid) or 0.0
                self.rss_max["ctld"] = max(self.rss_max["ctld"], r)
                if self.sampling_steady:
                    self.rss_steady_max = max(self.rss_steady_max, r)
            self.rss_max["sim"] = max(self.rss_max["sim"], rss_mb(me) or 0.0)
            await trio.sleep(0.5)

    def _state_save_figures(self) -> None:
        d = self.ctl.state_dir
        if d is not None and d.exists():
            files = [p for p in d.rglob("*") if p.is_file()]
            self.fig["state_files"] = len(files)
            self.fig["state_file_bytes"] = sum(p.stat().st_size for p in files)

    def _finish(self) -> None:
        fleet = self.fleet
        if self.ctl.pid:
            self.fig["ctld_rss_mb"] = rounded(
                max(self.rss_max["ctld"], peak_rss_mb(self.ctl.pid) or 0.0), 1
            )
        else:
            self.fig["ctld_rss_mb"] = None
        self.fig["sim_rss_mb"] = rounded(max(self.rss_max["sim"], peak_rss_mb(os.getpid()) or 0), 1)
        self.fig["false_down"] = len(fleet.false_down)
        if fleet.false_down:
            self.fig["false_down_names"] = sorted(fleet.false_down)[:10]
        if fleet.rejoin_rtts:
            self.fig["churn_rejoins"] = len(fleet.rejoin_rtts)
            self.fig["churn_rejoin_p50_ms"] = ms(percentile(fleet.rejoin_rtts, 50))
            self.fig["churn_rejoin_p99_ms"] = ms(percentile(fleet.rejoin_rtts, 99))
            self.fig["churn_rejoin_bad_state"] = len(fleet.rejoin_bad_state)
        self.fig["source_addresses_used"] = sorted(fleet.sources_used)
        self.fig["disconnects"] = fleet.disconnects
        self.fig["busy_refusals"] = fleet.busy
        self.fig["reregistrations"] = fleet.reregistrations
        if fleet.register_errors:
            self.fig["register_errors"] = dict(fleet.register_errors)
        self.fig["connect_failures"] = fleet.connect_failures
        self.fig["config_pushes"] = fleet.config_pushes
        if fleet.refused:
            self.fig["refused"] = dict(fleet.refused.most_common(5))
        if fleet.errors:
            self.fig["errors"] = dict(fleet.errors.most_common(10))
        for key in ("storm_s", "detect_lag_s", "rinfo_s", "ctld_cpu_pct"):
            self.fig.setdefault(key, None)
