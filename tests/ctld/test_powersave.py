"""Power save in-process under MockClock: ResumeRate, budgets, SuspendTime precedence,
exclusions, the keep-warm pool, CLOUD nodes, restarts mid power-up, the resume file, programs'
signal mask and descriptors, LastPowerAction."""

from __future__ import annotations

import os
import signal
import stat

import orjson
import trio

from ranch.cli.show_records import last_power_action, node_lines
from ranch.conf import hostlist
from ranch.conf.build import parse_config_text
from ranch.ctld.programs import run_program
from ranch.ctld.site import Site
from ranch.ctld.state import deferred
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import beat, job, register, state, wall

CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
HeartbeatInterval=1000
SlurmdTimeout=5000
ReturnToService=1
SuspendProgram=/bin/true
ResumeProgram=/bin/true
ResumeFailProgram=/bin/true
SuspendTimeout=5
ResumeTimeout=20
{extra}
{nodes}
PartitionName=main Nodes=n[1-4] Default=YES {part}
"""
NODES = "NodeName=n[1-4] CPUs=4 RealMemory=1000 TmpDisk=100 Gres=gpu:2"


def make(extra: str = "", nodes: str = NODES, part: str = "",
         state_dir: str | None = None) -> tuple[Cluster, list[tuple]]:
    runs: list[tuple] = []

    def spawn(fn, *args, **kw) -> None:
        runs.append((args[0], ",".join(hostlist.expand(args[2]))))  # (kind, nodes)

    cfg = parse_config_text(CONF.format(extra=extra, nodes=nodes, part=part), path="/t.conf")
    return Cluster(cfg, wall=wall, spawn=spawn, site=Site(state_dir=state_dir)), runs


def update(cluster: Cluster, nodes: str, st: str, reason: str | None = None) -> None:
    r = cluster.update_nodes(m.UpdateNodes(nodes, st, reason, "root"))
    assert r.ok, r.errors


def config_items(cluster: Cluster) -> dict[str, str]:
    return dict(cluster.power.config_dump(cluster.config_dump).items)


async def test_resume_rate_holds_resumes_back_and_shows_budgets(autojump_clock) -> None:
    cluster, runs = make("SuspendRate=0\nResumeRate=2\n")
    async with trio.open_nursery() as nursery:
        cluster.start()
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        for n in ("n1", "n2", "n3", "n4"):
            register(cluster, n)
        update(cluster, "n[1-4]", "POWER_DOWN_FORCE")
        await trio.sleep(5.1)
        assert {state(cluster, n) for n in ("n1", "n4")} == {"IDLE+POWERED_DOWN"}
        assert config_items(cluster)["SuspendRate"] == "0 nodes/min (unlimited)"
        assert config_items(cluster)["ResumeRate"] == "2 nodes/min (budget 2 now)"
        update(cluster, "n[1-4]", "POWER_UP")
        assert runs[-1] == ("resume", "n1,n2")  # two tokens: one batch of two
        assert config_items(cluster)["ResumeRate"] == "2 nodes/min (budget 0 now)"
        assert state(cluster, "n3") == "IDLE+NOT_RESPONDING+POWERING_UP"
        assert cluster.nodes["n3"].power_action["waiting"]
        assert ("n3", "resume") not in cluster.deadlines  # its ResumeTimeout has not started
        await trio.sleep(20.1)
        assert state(cluster, "n1") == "DOWN+POWERED_DOWN+NOT_RESPONDING"  # timed out
        assert state(cluster, "n3") == "IDLE+NOT_RESPONDING+POWERING_UP"  # still waiting
        assert ("resume", "n3") not in runs
        await trio.sleep(10)
        cluster.power_save_pass()  # 30 s after the burst: one token back (2 a minute)
        assert runs[-1] == ("resume", "n3")
        assert cluster.deadlines.when(("n3", "resume")) == trio.current_time() + 20
        await trio.sleep(30)
        cluster.power_save_pass()
        assert ("resume", "n4") in runs
        register(cluster, "n3")
        assert state(cluster, "n3") == "IDLE"
        nursery.cancel_scope.cancel()


async def test_resume_rate_zero_is_unlimited(autojump_clock) -> None:
    cluster, runs = make("SuspendRate=0\nResumeRate=0\n")
    for n in ("n1", "n2", "n3", "n4"):
        register(cluster, n)
    update(cluster, "n[1-4]", "POWER_DOWN_FORCE")
    cluster.on_deadlines([(n, "suspend") for n in ("n1", "n2", "n3", "n4")])
    update(cluster, "n[1-4]", "POWER_UP")
    assert runs[-1] == ("resume", "n1,n2,n3,n4")


async def test_suspend_time_precedence_node_partition_global(autojump_clock) -> None:
    nodes = ("NodeName=n1 CPUs=4 RealMemory=1000 SuspendTime=30\n"
             "NodeName=n2 CPUs=4 RealMemory=1000 SuspendTime=INFINITE\n"
             "NodeName=n[3-4] CPUs=4 RealMemory=1000\n"
             "NodeName=x1 CPUs=4 RealMemory=1000\n"
             "PartitionName=other Nodes=x1")
    cluster, _ = make("SuspendTime=600\nSuspendRate=0\n", nodes=nodes, part="SuspendTime=120")
    for n in ("n1", "n2", "n3", "n4", "x1"):
        register(cluster, n, mem=1000, gpus=0)
    await trio.sleep(31)
    assert cluster.power_save_pass() == ["n1"]  # the node's own 30 s
    await trio.sleep(90)
    assert cluster.power_save_pass() == ["n3", "n4"]  # the partition's 120 s
    await trio.sleep(480)
    assert cluster.power_save_pass() == ["x1"]  # global 600 s
    await trio.sleep(6000)
    assert cluster.power_save_pass() == []  # n2: INFINITE on its line beats everything
    assert state(cluster, "n2") == "IDLE"


async def test_partition_infinite_and_exclusions(autojump_clock) -> None:
    cluster, _ = make("SuspendTime=60\nSuspendRate=0\nSuspendExcStates=DRAIN\n", part="")
    for n in ("n1", "n2", "n3", "n4"):
        register(cluster, n)
    update(cluster, "n4", "DRAIN", "bad fan")
    await trio.sleep(61)
    assert cluster.power_save_pass() == ["n1", "n2", "n3"]  # n4: drained, an excluded state
    cluster2, _ = make("SuspendTime=60\nSuspendExcParts=main\n")
    for n in ("n1", "n2"):
        register(cluster2, n)
    await trio.sleep(61)
    assert cluster2.power_save_pass() == []
    cluster3, _ = make("SuspendTime=60\n", part="SuspendTime=INFINITE")
    register(cluster3, "n1")
    await trio.sleep(61)
    assert cluster3.power_save_pass() == []


async def test_down_nodes_power_down_too_unless_down_is_an_excluded_state(autojump_clock) -> None:
    for extra, expected in (("", ["n1", "n2"]), ("SuspendExcStates=DOWN\n", ["n1"])):
        cluster, _ = make("SuspendTime=60\nSuspendRate=0\n" + extra)
        for n in ("n1", "n2"):
            register(cluster, n)
        update(cluster, "n2", "DOWN", "dead PSU")
        await trio.sleep(61)
        assert cluster.power_save_pass() == expected
        await trio.sleep(6)  # SuspendTimeout=5
        cluster.on_deadlines([(n, "suspend") for n in expected])
        if "n2" in expected:
            assert state(cluster, "n2") == "DOWN+POWERED_DOWN"  # `down~`: the admin's reason stays
            assert cluster.nodes["n2"].state.reason.text == "dead PSU"
        else:
            assert state(cluster, "n2") == "DOWN"


async def test_keep_warm_pool_is_honoured_as_nodes_come_and_go(autojump_clock) -> None:
    cluster, runs = make("SuspendTime=60\nSuspendRate=0\nResumeRate=0\n"
                         "SuspendExcNodes=n[1-4]:2\n")
    async with trio.open_nursery() as nursery:
        cluster.start()
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        conns = {n: register(cluster, n)[1] for n in ("n1", "n2", "n3", "n4")}
        await trio.sleep(61)
        assert cluster.power_save_pass() == ["n1", "n2"]  # two stay warm
        await trio.sleep(6)
        assert cluster.power_save_pass() == []
        # A warm node drains: the pool is one short, so an off node boots.
        update(cluster, "n3", "DRAIN", "bad fan")
        cluster.power_save_pass()
        assert runs[-1] == ("resume", "n1")
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING+POWERING_UP"
        cluster.power_save_pass()
        assert runs[-1] == ("resume", "n1")  # a booting node counts: no second boot
        register(cluster, "n1")
        # A job takes a warm node: the next off one boots.
        big = cluster.jobs.submit(job(nodelist="n4", cpus_per_task=4)).job_id
        assert state(cluster, "n4") == "ALLOCATED"
        cluster.power_save_pass()
        assert runs[-1] == ("resume", "n2")
        register(cluster, "n2")
        await trio.sleep(61)  # n1 and n2 idle past SuspendTime, but they are the warm two
        assert cluster.power_save_pass() == []
        # The job ends: three warm, one may go.
        beat(cluster, "n4", conns["n4"], 1, jobs_ended=(m.JobEnd(big, "COMPLETED"),))
        assert state(cluster, "n4") == "IDLE"
        await trio.sleep(61)
        assert cluster.power_save_pass() == ["n1"]
        nursery.cancel_scope.cancel()


async def test_cloud_node_starts_off_resumes_when_asked_and_pending_down_shows_bang(
    autojump_clock,
) -> None:
    nodes = NODES + "\nNodeName=c1 CPUs=4 RealMemory=1000 State=CLOUD"
    cluster, runs = make("SuspendRate=0\n", nodes=nodes)
    async with trio.open_nursery() as nursery:
        cluster.start()
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        rec = {r["name"]: r for r in cluster.snapshot().nodes}["c1"]
        assert rec["compact"] == "idle~" and rec["complete"] == "IDLE+CLOUD+POWERED_DOWN"
        update(cluster, "c1", "POWER_UP")
        assert runs[-1] == ("resume", "c1")
        assert cluster.snapshot().nodes[-1]["compact"] == "idle#"
        register(cluster, "c1", mem=1000, gpus=0)
        assert state(cluster, "c1") == "IDLE+CLOUD"
        update(cluster, "c1", "POWER_DOWN")
        assert cluster.snapshot().nodes[-1]["compact"] == "idle!"
        assert cluster.power_save_pass() == ["c1"]
        assert cluster.snapshot().nodes[-1]["compact"] == "idle%"
        await trio.sleep(5.1)
        assert cluster.snapshot().nodes[-1]["compact"] == "idle~"
        nursery.cancel_scope.cancel()


async def test_restart_mid_power_up_keeps_the_original_resume_deadline(autojump_clock) -> None:
    cluster, _ = make("SuspendRate=0\n")
    register(cluster, "n1")
    update(cluster, "n1", "POWER_DOWN_FORCE")
    cluster.on_deadlines([("n1", "suspend")])
    update(cluster, "n1", "POWER_UP")
    doc = orjson.loads(deferred.dumps(cluster.save_doc()))
    await trio.sleep(15)  # the controller is away for 15 of the 20 s
    again, runs = make("SuspendRate=0\n")
    again.restore(doc)
    assert state(again, "n1") == "IDLE+NOT_RESPONDING+POWERING_UP"
    async with trio.open_nursery() as nursery:
        again.start()
        nursery.start_soon(again.deadlines.run, again.on_deadlines)
        await trio.sleep(4.9)
        assert state(again, "n1") == "IDLE+NOT_RESPONDING+POWERING_UP"
        await trio.sleep(0.2)
        assert state(again, "n1") == "DOWN+POWERED_DOWN+NOT_RESPONDING"
        assert runs == [("resume_fail", "n1")]
        register(again, "n1", boot=99.0)  # it boots late: ReturnToService=1 takes it back
        assert state(again, "n1") == "IDLE"
        nursery.cancel_scope.cancel()


def _script(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


async def test_resume_file_lives_while_the_program_runs_and_records_the_outcome(tmp_path) -> None:
    cluster, _ = make(state_dir=str(tmp_path))
    for n in ("n1", "n2", "n3"):
        register(cluster, n)
    reply = cluster.jobs.submit(m.SubmitJob(script="#!/bin/sh\ntrue\n", user="alice", uid=1000,
                                            gid=1000, workdir="/home/a", num_nodes=3))
    assert isinstance(reply, m.SubmitReply)
    assert sorted(cluster.jobs.jobs[reply.job_id].nodes) == ["n1", "n2", "n3"]
    copy = tmp_path / "copy.json"
    prog = _script(tmp_path, "resume.sh",
                   f'stat -c %a "$SLURM_RESUME_FILE" > {tmp_path}/mode\n'
                   f'cp "$SLURM_RESUME_FILE" {copy}\necho "$SLURM_RESUME_FILE" > {tmp_path}/path\n')
    result = await cluster.power.run_batch("resume", prog, "n[1-2]", ("n1", "n2"))
    assert result.returncode == 0
    doc = orjson.loads(copy.read_bytes())
    two, three = hostlist.fold(["n1", "n2"]), hostlist.fold(["n1", "n2", "n3"])
    assert doc["all_nodes_resume"] == two and doc["all_nodes"] == two
    job = doc["jobs"][0]
    assert (job["job_id"], job["nodes_alloc"], job["nodes_resume"], job["nodes"]) == (
        reply.job_id, three, two, three)
    assert job["partition"] == "main"
    assert (tmp_path / "mode").read_text().strip() == "600"
    used = (tmp_path / "path").read_text().strip()
    assert os.path.dirname(used) == str(tmp_path) and not os.path.exists(used)  # removed after
    action = cluster.nodes["n1"].power_action
    assert action["action"] == "resume" and action["rc"] == 0
    rec = {r["name"]: r for r in cluster.snapshot().nodes}["n1"]
    assert rec["last_power_action"]["rc"] == 0
    shown = "\n".join(node_lines(rec))
    assert "LastPowerAction=resume rc=0 at " in shown
    assert last_power_action({"action": "suspend", "rc": None, "time": 0.0,
                              "error": "cannot run /x: No such file"}).startswith(
        "suspend rc=None at ")


async def test_missing_program_is_logged_and_recorded(tmp_path) -> None:
    cluster, _ = make()
    result = await cluster.power.run_batch("suspend", str(tmp_path / "nope"), "n1", ("n1",))
    assert result.returncode is None and "cannot run" in result.error
    assert "cannot run" in cluster.nodes["n1"].power_action["error"]


async def test_hung_program_is_killed_logged_and_blocks_nothing(tmp_path) -> None:
    cfg = parse_config_text(CONF.format(extra="", nodes=NODES, part="").replace(
        "SuspendTimeout=5", "SuspendTimeout=1").replace("ResumeTimeout=20", "ResumeTimeout=1"),
        path="/t.conf")
    cluster = Cluster(cfg, wall=wall)
    prog = _script(tmp_path, "hang.sh", "echo hanging\nsleep 60\n")
    served = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cluster.power.run_batch, "suspend", prog, "n1", ("n1",))
        for _ in range(5):  # the controller keeps answering while the program hangs
            served.append(cluster.ping())
            await trio.sleep(0.1)
    assert len(served) == 5
    action = cluster.nodes["n1"].power_action
    assert action["rc"] == -9 and action["error"] == "killed at timeout"


async def test_programs_get_a_clean_signal_mask_and_no_inherited_descriptors(tmp_path) -> None:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(fd, True)
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGUSR1})
    old_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        # exec: the shell's own mask is read by what replaces it (a shell waiting for a child
        # shows sigsuspend's all-blocked mask in /proc)
        prog = _script(tmp_path, "p.sh",
                       f"[ -e /proc/$$/fd/{fd} ] && echo leaked || echo closed\n"
                       "exec grep -E '^Sig(Blk|Ign)' /proc/self/status\n")
        result = await run_program("resume", prog, "n1", conf_path="/t.conf", timeout=5)
    finally:
        signal.signal(signal.SIGHUP, old_hup)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        os.close(fd)
    fields = dict(line.split(":\t") for line in result.output.splitlines() if ":\t" in line)
    assert int(fields["SigBlk"], 16) == 0, result.output
    assert not int(fields["SigIgn"], 16) & (1 << (signal.SIGHUP - 1)), result.output
    assert "closed" in result.output
