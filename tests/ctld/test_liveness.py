"""The controller's own stalls and its guards, in-process under trio's MockClock (issue 18).

A stall is simulated the way it looks from inside: trio's clock jumps while no task runs.
"""

from __future__ import annotations

import trio

from ranch.ctld.nodes.stalls import StallWatch
from ranch.ctld.state import deferred
from ranch.protocol import messages as m
from ranch.statemachine import events
from tests.ctld.harness import Harness as Cluster

from .helpers import beat, make_config, register, state, wall

FOUR = "HeartbeatInterval=10\nSlurmdTimeout=60\n"
GUARDED = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
HeartbeatInterval=10
SlurmdTimeout=60
ReturnToService=1
{extra}
NodeName=n[1-6] CPUs=4 RealMemory=1000 TmpDisk=100 Gres=gpu:2
PartitionName=main Nodes=n[1-6] Default=YES
"""


def guarded(extra: str = "") -> Cluster:
    return Cluster(make_config(text=GUARDED.format(extra=extra)), wall=wall)


class Fleet:
    """Registered nodes beating every HeartbeatInterval, except those told to stop."""

    def __init__(self, cluster: Cluster, names: list[str]) -> None:
        self.c = cluster
        self.conns = {n: register(cluster, n)[1] for n in names}
        self.seq = 0
        self.silent: set[str] = set()

    async def run(self) -> None:
        while True:
            await trio.sleep(10)
            self.beat()

    def beat(self) -> None:
        self.seq += 1
        for name, conn in self.conns.items():
            if name not in self.silent:
                beat(self.c, name, conn, self.seq)


async def start(cluster: Cluster, nursery: trio.Nursery, names: list[str]) -> Fleet:
    cluster.start()
    nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
    fleet = Fleet(cluster, names)
    nursery.start_soon(fleet.run)
    return fleet


def allocate(cluster: Cluster, name: str, cpus: int) -> None:
    """Work on the node, as a job would place it (the table's allocation event)."""
    _, err = cluster.apply_event(cluster.nodes[name],
                                 events.AllocationChanged(now=wall(), cpus_alloc=cpus))
    assert err is None, err


def downs(cluster: Cluster, among: list[str] | None = None) -> list[str]:
    """Nodes set DOWN, in order (of `among` only: unregistered nodes go DOWN on their own)."""
    return [e["node"] for e in cluster.eventlog.events
            if e["kind"] == "state" and e["new"].startswith("DOWN")
            and (among is None or e["node"] in among)]


# --- the controller's stalls -----------------------------------------------------------------


async def test_a_stall_longer_than_slurmd_timeout_downs_no_node(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    names = ["n1", "n2", "n3", "n4"]
    async with trio.open_nursery() as nursery:
        fleet = await start(cluster, nursery, names)
        await trio.sleep(35)
        autojump_clock.jump(130)  # the controller is away for 2 x SlurmdTimeout
        fleet.beat()  # what waited in the sockets meanwhile comes in after it
        await trio.sleep(0)
        await trio.sleep(100)
        assert {n: state(cluster, n) for n in names} == dict.fromkeys(names, "IDLE")
        assert downs(cluster) == []
        watch = cluster.liveness.stalls
        assert watch.stalls == 1 and 130 <= watch.last_stall <= 131
        assert [e["kind"] for e in cluster.eventlog.events].count("controller_stall") == 1
        nursery.cancel_scope.cancel()


async def test_silence_before_a_stall_still_counts_but_not_the_stall(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        fleet = await start(cluster, nursery, ["n1", "n2"])
        await trio.sleep(5)
        fleet.silent.add("n1")  # really dead, from t=5 (last heard at t=0)
        await trio.sleep(25)
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING"  # 20 s of its own silence
        autojump_clock.jump(100)  # then the controller stalls for 100 s at t=30
        await trio.sleep(0)
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING"  # not DOWN: 30 s are its own
        await trio.sleep(29)
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING"
        await trio.sleep(3)  # 60 s of silence of its own (give or take the 1 s tick): DOWN
        assert state(cluster, "n1") == "DOWN+NOT_RESPONDING"
        assert state(cluster, "n2") == "IDLE"
        nursery.cancel_scope.cancel()


async def test_short_lateness_is_load_not_a_stall(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        await start(cluster, nursery, ["n1"])
        for _ in range(20):
            await trio.sleep(0.7)
            autojump_clock.jump(0.4)  # below the threshold (the tick period, at least 0.5 s)
            await trio.sleep(0)
        assert cluster.liveness.stalls.stalls == 0
        nursery.cancel_scope.cancel()


async def test_power_timeouts_are_put_off_by_a_stall(autojump_clock, tmp_path) -> None:
    cluster = Cluster(make_config(extra="SuspendTimeout=30\nResumeTimeout=60\n"
                                  "ResumeProgram=/bin/true\nSuspendTime=600\n"), wall=wall)
    async with trio.open_nursery() as nursery:
        await start(cluster, nursery, ["n1"])
        result = cluster.update_nodes(m.UpdateNodes("n2", "POWER_DOWN_FORCE", None, "root"))
        assert result.ok, result.errors
        await trio.sleep(40)
        assert state(cluster, "n2") == "IDLE+POWERED_DOWN"
        cluster.update_nodes(m.UpdateNodes("n2", "POWER_UP", None, "root"))
        assert "POWERING_UP" in state(cluster, "n2")
        await trio.sleep(10)
        autojump_clock.jump(55)  # ResumeTimeout passes while the controller is away
        await trio.sleep(0)
        register(cluster, "n2")  # its registration waited in the socket
        assert state(cluster, "n2") == "IDLE"
        nursery.cancel_scope.cancel()


def test_wall_clock_steps_and_host_suspends_are_told_apart() -> None:
    t = {"wall": 1000.0, "mono": 50.0, "boot": 60.0, "trio": 0.0}
    from ranch.ctld.deadlines import Deadlines

    seen: list[tuple[float, str]] = []
    watch = StallWatch(Deadlines(), clock=lambda: t["trio"],
                       on_stall=lambda s, c: seen.append((s, c)), wall=lambda: t["wall"],
                       monotonic=lambda: t["mono"], boot=lambda: t["boot"], check_clocks=True)
    watch.configure(10, 10)
    watch.arm()

    def tick(dt: float) -> None:
        for k in ("wall", "mono", "boot", "trio"):
            t[k] += dt
        watch.notice()

    tick(1.0)
    assert seen == [] and watch.late_allowance() == 0.0
    t["wall"] += 30.0  # NTP stepped the wall clock forward
    tick(1.0)
    assert seen == [(0.0, "wall clock jumped +30.0 s")] and watch.clock_jumps == 1
    assert watch.late_allowance() == 30.0  # peers' frames look 30 s older for a while
    t["wall"] += 40.0
    t["boot"] += 40.0  # a suspend: BOOTTIME and wall ran on, monotonic did not
    tick(1.0)
    assert seen[-1] == (0.0, "host suspended 40.0 s") and watch.stalls == 1
    t["wall"] -= 20.0  # a step back: logged, but frames from the future get no allowance
    tick(1.0)
    assert seen[-1] == (0.0, "wall clock jumped -20.0 s") and watch.clock_jumps == 2
    for _ in range(11):
        tick(1.0)
    assert watch.late_allowance() == 0.0  # MessageTimeout after the last widening


# --- the DownGuard ---------------------------------------------------------------------------


async def test_half_the_nodes_silent_at_once_are_held_not_downed(autojump_clock) -> None:
    cluster = guarded()
    names = [f"n{i}" for i in range(1, 7)]
    async with trio.open_nursery() as nursery:
        fleet = await start(cluster, nursery, names)
        allocate(cluster, "n1", 4)
        await trio.sleep(15)
        fleet.silent |= {"n1", "n2", "n3"}
        await trio.sleep(70)
        for n in ("n1", "n2", "n3"):
            assert "NOT_RESPONDING" in state(cluster, n) and "DOWN" not in state(cluster, n)
            assert cluster.nodes[n].state.reason.text == "Not responding, held by DownGuard"
        assert state(cluster, "n1") == "ALLOCATED+NOT_RESPONDING"  # its work was not killed
        assert downs(cluster) == []
        guard = cluster.liveness.guard
        assert guard.tripped and sorted(guard.held) == ["n1", "n2", "n3"]
        assert guard.detail == "3 of 6 nodes in service went silent within 60 s"
        assert "guard_tripped" in [e["kind"] for e in cluster.eventlog.events]
        # Held for as long as it takes: still not DOWN much later.
        await trio.sleep(600)
        assert downs(cluster) == []
        nursery.cancel_scope.cancel()


async def test_admin_confirms_held_nodes_down(autojump_clock) -> None:

    cluster = guarded()
    names = [f"n{i}" for i in range(1, 5)]
    async with trio.open_nursery() as nursery:
        fleet = await start(cluster, nursery, names)
        await trio.sleep(5)
        fleet.silent |= {"n1", "n2"}
        await trio.sleep(80)
        assert sorted(cluster.liveness.guard.held) == ["n1", "n2"]
        reply = cluster.guards.handle(m.GuardRequest("confirm", "down", "n1", "alice"))
        assert reply.ok and reply.changed == ("n1",)
        assert state(cluster, "n1") == "DOWN+NOT_RESPONDING"
        assert cluster.nodes["n1"].state.reason.text == "Not responding"
        assert cluster.liveness.guard.tripped  # n2 is still held
        reply = cluster.guards.handle(m.GuardRequest("confirm", "down", "n3", "alice"))
        assert not reply.ok and reply.errors == ("node n3 is not held by the DownGuard",)
        reply = cluster.guards.handle(m.GuardRequest("confirm", "down", "", "alice"))
        assert reply.changed == ("n2",) and not cluster.liveness.guard.tripped
        assert downs(cluster, names) == ["n1", "n2"]
        causes = [e["cause"] for e in cluster.eventlog.events
                  if e["kind"] == "state" and e["new"].startswith("DOWN") and e["node"] in names]
        assert causes == ["admin:alice", "admin:alice"]
        nursery.cancel_scope.cancel()


async def test_the_guard_clears_itself_when_held_nodes_come_back(autojump_clock) -> None:
    cluster = guarded()
    names = [f"n{i}" for i in range(1, 5)]
    async with trio.open_nursery() as nursery:
        fleet = await start(cluster, nursery, names)
        await trio.sleep(5)
        fleet.silent |= {"n1", "n2"}
        await trio.sleep(80)
        assert cluster.liveness.guard.tripped
        fleet.silent.clear()  # the switch is back
        await trio.sleep(10)
        assert {n: state(cluster, n) for n in names} == dict.fromkeys(names, "IDLE")
        assert cluster.nodes["n1"].state.reason is None
        assert not cluster.liveness.guard.tripped and cluster.liveness.guard.held == {}
        kinds = [e["kind"] for e in cluster.eventlog.events]
        assert kinds.count("guard_tripped") == 1 and kinds.count("guard_cleared") == 1
        nursery.cancel_scope.cancel()


async def test_reset_gives_held_nodes_one_more_timeout(autojump_clock) -> None:

    cluster = guarded("DownGuardPercent=60")
    names = [f"n{i}" for i in range(1, 6)]
    async with trio.open_nursery() as nursery:
        fleet = await start(cluster, nursery, names)
        await trio.sleep(5)
        fleet.silent |= {"n1", "n2", "n3"}  # 3 of 5: at least 60 %
        await trio.sleep(80)
        assert len(cluster.liveness.guard.held) == 3
        reply = cluster.guards.handle(m.GuardRequest("reset", "down", "", "bob"))
        assert reply.ok and sorted(reply.changed) == ["n1", "n2", "n3"]
        assert cluster.nodes["n1"].state.reason is None  # the hold is gone, `*` stays
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING"
        fleet.silent.discard("n3")  # n3 comes back; n1 and n2 are really gone
        await trio.sleep(61)
        assert downs(cluster, names) == ["n1", "n2"]  # 2 of 5 is below 60 %: judged as usual
        assert state(cluster, "n3") == "IDLE"
        nursery.cancel_scope.cancel()


async def test_one_silent_node_of_four_goes_down_as_before(autojump_clock) -> None:
    cluster = guarded()
    async with trio.open_nursery() as nursery:
        fleet = await start(cluster, nursery, ["n1", "n2", "n3", "n4"])
        await trio.sleep(5)
        fleet.silent.add("n1")
        await trio.sleep(61)
        assert state(cluster, "n1") == "DOWN+NOT_RESPONDING"
        assert not cluster.liveness.guard.tripped
        nursery.cancel_scope.cancel()


async def test_the_guard_needs_enough_nodes_and_can_be_off(autojump_clock) -> None:
    for extra, names in (("", ["n1", "n2", "n3"]), ("DownGuardPercent=0", None)):
        cluster = guarded(extra)
        names = names or [f"n{i}" for i in range(1, 7)]
        async with trio.open_nursery() as nursery:
            fleet = await start(cluster, nursery, names)
            await trio.sleep(5)
            fleet.silent |= set(names[:2])  # 2 of 3 (below DownGuardMinNodes) / 2 of 6, off
            await trio.sleep(61)
            assert downs(cluster, names) == names[:2]
            assert not cluster.liveness.guard.tripped
            nursery.cancel_scope.cancel()


async def test_never_registered_nodes_do_not_trip_the_guard(autojump_clock) -> None:
    cluster = guarded()
    async with trio.open_nursery() as nursery:
        await start(cluster, nursery, ["n1", "n2"])  # n3..n6 never come
        await trio.sleep(61)
        # as slurmctld leaves them: UNKNOWN and not responding (`unk*`), never DOWN
        assert downs(cluster) == []
        assert all(cluster.nodes[n].complete == "UNKNOWN+NOT_RESPONDING"
                   for n in ("n3", "n4", "n5", "n6"))
        assert not cluster.liveness.guard.tripped
        nursery.cancel_scope.cancel()


# --- the DrainGuard --------------------------------------------------------------------------


def health(cluster: Cluster, name: str, conn, seq: int, verdict: str, message: str = "") -> None:
    report = m.HealthReport(verdict=verdict, message=message, ran_at=1.7e9 + seq)
    beat(cluster, name, conn, seq, health=report)


async def test_drain_guard_pauses_drains_past_its_share(autojump_clock) -> None:

    cluster = guarded("DrainGuardPercent=34")  # 34 % of 6 nodes: 2 drains per window
    names = [f"n{i}" for i in range(1, 7)]
    conns = {n: register(cluster, n)[1] for n in names}
    for i, n in enumerate(names[:4]):
        health(cluster, n, conns[n], 1 + i, "drain", "HC: bad rollout")
    assert [state(cluster, n) for n in names[:4]] == [
        "IDLE+DRAIN", "IDLE+DRAIN", "IDLE", "IDLE"]
    dg = cluster.drain_guard
    assert dg.tripped and sorted(dg.paused) == ["n3", "n4"]
    assert cluster.nodes["n3"].state.reason.text == "HC: bad rollout [drain paused by DrainGuard]"
    # A paused node is still schedulable (its reason stays when work lands on it).
    allocate(cluster, "n3", 2)
    assert state(cluster, "n3") == "MIXED"
    assert cluster.nodes["n3"].state.reason is not None
    # Its next check passes: the paused reason goes by itself.
    health(cluster, "n4", conns["n4"], 10, "ok")
    assert cluster.nodes["n4"].state.reason is None and "n4" not in dg.paused
    reply = cluster.guards.handle(m.GuardRequest("confirm", "drain", "", "alice"))
    assert reply.ok and reply.changed == ("n3",)
    assert state(cluster, "n3") == "MIXED+DRAIN"
    assert dg.tripped  # only a reset closes it
    health(cluster, "n5", conns["n5"], 11, "fail", "HC: gpu gone")
    assert state(cluster, "n5") == "IDLE" and "n5" in dg.paused
    cluster.guards.handle(m.GuardRequest("reset", "drain", "", "alice"))
    assert not dg.tripped and cluster.nodes["n5"].state.reason is None
    health(cluster, "n5", conns["n5"], 12, "fail", "HC: gpu gone")
    assert state(cluster, "n5") == "IDLE+FAIL"
    kinds = [e["kind"] for e in cluster.eventlog.events]
    assert kinds.count("guard_tripped") == 1 and "guard_confirmed" in kinds


async def test_drain_guard_leaves_repeats_and_small_clusters_alone(autojump_clock) -> None:
    cluster = guarded("DrainGuardPercent=1\nDrainGuardMinNodes=7")  # 6 nodes: below the minimum
    conns = {n: register(cluster, n)[1] for n in ("n1", "n2", "n3")}
    for i, n in enumerate(conns):
        health(cluster, n, conns[n], 1 + i, "drain", "HC: x")
    assert all(state(cluster, n) == "IDLE+DRAIN" for n in conns)
    assert not cluster.drain_guard.tripped
    cluster = guarded("DrainGuardPercent=1")  # 1 drain allowed (at least one always is)
    conns = {n: register(cluster, n)[1] for n in ("n1", "n2", "n3", "n4")}  # 4 in service
    health(cluster, "n1", conns["n1"], 1, "drain", "HC: x")
    health(cluster, "n1", conns["n1"], 2, "fail", "HC: worse")  # the same node: no new drain
    assert state(cluster, "n1") == "IDLE+FAIL" and not cluster.drain_guard.tripped
    health(cluster, "n2", conns["n2"], 3, "drain", "HC: x")
    assert cluster.drain_guard.tripped and state(cluster, "n2") == "IDLE"


async def test_drain_guard_counts_only_the_nodes_in_service(autojump_clock) -> None:
    """Issue 33: n[1-3] in service and f[1-3] FUTURE; two of three failing checks both drain
    (DrainGuardMinNodes=4 keeps the guard out of a cluster of three). Never-registered and
    powered-down nodes are not in the base either."""
    for others in ("NodeName=f[1-3] CPUs=4 RealMemory=1000 State=FUTURE",
                   "NodeName=f[1-2] CPUs=4 RealMemory=1000\n"  # never registered
                   "NodeName=f3 CPUs=4 RealMemory=1000 State=CLOUD"):  # powered down
        text = GUARDED.format(extra="").replace(
            "NodeName=n[1-6] CPUs=4 RealMemory=1000 TmpDisk=100 Gres=gpu:2",
            "NodeName=n[1-3] CPUs=4 RealMemory=1000 TmpDisk=100 Gres=gpu:2\n" + others
        ).replace("Nodes=n[1-6]", "Nodes=n[1-3],f[1-3]")
        cluster = Cluster(make_config(text=text), wall=wall)
        conns = {n: register(cluster, n)[1] for n in ("n1", "n2", "n3")}
        health(cluster, "n1", conns["n1"], 1, "drain", "HC: bad rollout")
        health(cluster, "n2", conns["n2"], 2, "fail", "HC: gpu gone")
        assert [state(cluster, n) for n in ("n1", "n2", "n3")] == [
            "IDLE+DRAIN", "IDLE+FAIL", "IDLE"], others
        assert not cluster.drain_guard.tripped and not cluster.drain_guard.paused
    # From four nodes in service it acts (25 %: one drain per window, the second is paused).
    cluster = guarded()
    conns = {n: register(cluster, n)[1] for n in ("n1", "n2", "n3", "n4")}
    health(cluster, "n1", conns["n1"], 1, "drain", "HC: x")
    health(cluster, "n2", conns["n2"], 2, "drain", "HC: x")
    assert state(cluster, "n2") == "IDLE" and cluster.drain_guard.tripped
    assert "of 4 nodes in service" in cluster.drain_guard.detail


async def test_guard_status_and_metrics_text(autojump_clock) -> None:
    from ranch.ctld.web.metrics import guards_text

    cluster = guarded()
    reply = cluster.guards.handle(m.GuardRequest("show"))
    assert [g["state"] for g in reply.guards] == ["ARMED", "ARMED"]
    text = guards_text(reply.guards, reply.controller)
    assert 'ranch_guard_tripped{guard="DownGuard"} 0' in text
    assert 'ranch_guard_nodes{guard="DrainGuard"} 0' in text
    assert "ranch_controller_stalls_total 0" in text
    bad = cluster.guards.handle(m.GuardRequest("confirm", "everything"))
    assert not bad.ok and "not one of down, drain" in bad.errors[0]


async def test_a_restart_counts_silence_from_the_start_and_is_recorded(autojump_clock) -> None:
    first = guarded()
    for n in ("n1", "n2", "n3", "n4"):
        register(first, n)
    import orjson

    doc = orjson.loads(deferred.dumps(first.save_doc()))  # as the state file holds it
    doc["saved_at"] = wall() - 500.0  # the controller was away for 500 s
    again = guarded()
    again.restore(doc)
    async with trio.open_nursery() as nursery:
        again.start()
        nursery.start_soon(again.deadlines.run, again.on_deadlines)
        [rec] = [e for e in again.eventlog.events if e["kind"] == "controller_restart"]
        assert rec["seconds"] == 500.0
        await trio.sleep(19)  # nothing heard since the start, but less than 2 intervals
        assert all(state(again, n) == "IDLE" for n in ("n1", "n2", "n3", "n4"))
        await trio.sleep(70)  # none of the four came back: a mass silence, held, not DOWN
        assert sorted(again.liveness.guard.held) == ["n1", "n2", "n3", "n4"]
        assert downs(again, ["n1", "n2", "n3", "n4"]) == []
        nursery.cancel_scope.cancel()


async def test_a_takeover_is_recorded_as_one(autojump_clock) -> None:
    """A standby that takes the seat (start with a grace) logs controller_takeover, not a
    restart: `rcontrol events` and the page's timeline tell the two apart."""
    first = guarded()
    register(first, "n1")
    import orjson

    doc = orjson.loads(deferred.dumps(first.save_doc()))
    doc["saved_at"] = wall() - 7.0
    again = guarded()
    again.restore(doc)
    again.start(grace=10.0)
    kinds = [e["kind"] for e in again.eventlog.events if e["node"] == "-"]
    assert "controller_takeover" in kinds and "controller_restart" not in kinds
