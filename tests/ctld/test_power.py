"""Power saving: idle suspend, SuspendTimeout, POWER_UP and ResumeTimeout, exclusions, programs."""

from __future__ import annotations

import os
import stat

import trio

from ranch.conf import hostlist
from ranch.ctld.programs import run_program
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, register, state, wall

POWER = """\
SuspendProgram=/bin/true
ResumeProgram=/bin/true
ResumeFailProgram=/bin/true
SuspendTime=60
SuspendTimeout=5
ResumeTimeout=20
SuspendRate=2
HeartbeatInterval=1000
SlurmdTimeout=5000
"""


def power_cluster(extra: str = "") -> tuple[Cluster, list[tuple]]:
    runs: list[tuple] = []

    def spawn(fn, *args, **kw) -> None:
        runs.append((args[0], ",".join(hostlist.expand(args[2]))))  # (kind, nodes)

    cluster = Cluster(make_config(extra=POWER + extra), wall=wall, spawn=spawn)
    return cluster, runs


async def test_idle_nodes_suspend_within_rate_then_power_down(autojump_clock) -> None:
    cluster, runs = power_cluster()
    async with trio.open_nursery() as nursery:
        cluster.start()
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        for n in ("n1", "n2", "n3"):
            register(cluster, n)
        await trio.sleep(30)
        assert cluster.power_save_pass() == []  # not idle long enough
        await trio.sleep(31)
        # n4 never registered (UNKNOWN, not IDLE); SuspendRate=2 per minute.
        assert cluster.power_save_pass() == ["n1", "n2"]
        assert state(cluster, "n1") == "IDLE+POWERING_DOWN"
        assert runs == [("suspend", "n1,n2")]  # one batched run with the hostlist
        assert cluster.power_save_pass() == []  # rate used up for this minute
        await trio.sleep(5.1)  # SuspendTimeout
        assert state(cluster, "n1") == "IDLE+POWERED_DOWN"
        assert cluster.snapshot().nodes[0]["compact"] == "idle~"
        await trio.sleep(60)
        assert cluster.power_save_pass() == ["n3"]
        nursery.cancel_scope.cancel()


async def test_power_up_then_resume_timeout(autojump_clock) -> None:
    cluster, runs = power_cluster()
    async with trio.open_nursery() as nursery:
        cluster.start()
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        register(cluster, "n1")
        register(cluster, "n2")
        r = cluster.update_nodes(m.UpdateNodes("n[1-2]", "POWER_DOWN_FORCE", None, "root"))
        assert r.ok, r.errors
        await trio.sleep(6)
        assert state(cluster, "n1") == "IDLE+POWERED_DOWN"
        r = cluster.update_nodes(m.UpdateNodes("n[1-2]", "POWER_UP", None, "root"))
        assert r.ok, r.errors
        assert runs[-1] == ("resume", "n1,n2")
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING+POWERING_UP"
        register(cluster, "n2")  # n2 boots in time
        assert state(cluster, "n2") == "IDLE"
        await trio.sleep(20.1)  # ResumeTimeout: n1 never came back
        assert state(cluster, "n1") == "DOWN+POWERED_DOWN+NOT_RESPONDING"
        assert cluster.nodes["n1"].state.reason.text == "ResumeTimeout reached"
        assert runs[-1] == ("resume_fail", "n1")
        assert state(cluster, "n2") == "IDLE"
        nursery.cancel_scope.cancel()


async def test_exclusions(autojump_clock) -> None:
    cluster, _ = power_cluster("SuspendExcNodes=n[1-3]:2\nSuspendExcStates=DRAIN\n")
    for n in ("n1", "n2", "n3", "n4"):
        register(cluster, n)
    cluster.update_nodes(m.UpdateNodes("n4", "DRAIN", "x", "a"))
    await trio.sleep(61)
    # n[1-3] must keep 2 up, so one of them may go; n4 is drained (excluded state).
    assert cluster.power_save_pass() == ["n1"]
    await trio.sleep(61)
    assert cluster.power_save_pass() == []


async def test_cloud_nodes_start_powered_down() -> None:
    text = make_config().files[0][1] + "NodeName=c1 CPUs=4 State=CLOUD\n"
    from ranch.conf.build import parse_config_text

    cluster = Cluster(parse_config_text(text, path="/t.conf"), wall=wall)
    assert cluster.snapshot().nodes[-1]["compact"] == "idle~"


def _script(tmp_path, body: str) -> str:
    path = tmp_path / "prog.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


async def test_program_gets_hostlist_clean_env_and_output_is_kept(tmp_path) -> None:
    os.environ["RANCH_TEST_SECRET"] = "leak"
    prog = _script(tmp_path, 'echo "nodes=$1 conf=$SLURM_CONF secret=$RANCH_TEST_SECRET"\n'
                             'echo oops >&2\nexit 3\n')
    result = await run_program("suspend", prog, "n[1-2]", conf_path="/t.conf", timeout=5)
    assert result.returncode == 3 and not result.timed_out
    assert "nodes=n[1-2] conf=/t.conf secret=\n" in result.output
    assert "oops" in result.output


async def test_program_is_killed_at_timeout(tmp_path) -> None:
    marker = tmp_path / "child.pid"
    prog = _script(tmp_path, f"sleep 30 &\necho $! > {marker}\necho started\nwait\n")
    result = await run_program("resume", prog, "n1", conf_path="/t.conf", timeout=0.5)
    assert result.timed_out and result.returncode == -9 and "started" in result.output
    child = int(marker.read_text())
    await trio.sleep(0.1)
    try:
        with open(f"/proc/{child}/stat") as f:
            alive = f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, unreaped
    except FileNotFoundError:
        alive = False
    assert not alive, "the program's children must be killed with it"
