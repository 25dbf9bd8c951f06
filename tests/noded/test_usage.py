"""rnoded's meter (noded/usage.py, issue 48) over real processes: a tree's RSS and VMSize (a
child's included), a step task's CPU as its supervisor's wait4 had it, the figures of several
tasks (largest, sums, least CPU), GPU samples, and the sampling schedule."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time

import attrs
import trio
import trio.testing

from ranch.noded import usage
from ranch.protocol.messages import GpuMetrics

HOLD = "import time\na = b'x' * (64 << 20)\ntime.sleep(30)\n"
PARENT = (f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {HOLD!r}])\n"
          "time.sleep(30)\n")  # the memory is its child's
SPIN = "import time\nwhile time.process_time() < 0.5: pass\n"


def test_a_tree_is_sampled_with_its_children() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT])
    try:
        meter = usage.Meter()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            meter.watch("k", {0: parent.pid})
            if meter.tracks["k"].tasks[0].max_rss_kib > 64 * 1024:
                break
            time.sleep(0.1)
        u = usage.usage_of(meter.stop("k"))
        assert u is not None and u.max_rss_kib > 64 * 1024 and u.max_vm_kib > u.max_rss_kib
        assert u.tasks == 1 and u.rss_kib == u.max_rss_kib and u.source == "proc"
    finally:
        for pid in usage.tree(parent.pid, include_root=False):
            os.kill(pid, 9)
        parent.kill()
        parent.wait()


def test_a_tasks_cpu_is_its_rusage_as_its_supervisor_reaped_it_and_tasks_add_up() -> None:
    meter = usage.Meter()
    procs = {task: subprocess.Popen([sys.executable, "-c", SPIN if task else "pass"])
             for task in (0, 1)}
    for task, p in procs.items():
        meter.watch("s", {task: p.pid})
    for task, p in procs.items():
        _, _, ru = os.wait4(p.pid, 0)  # as noded/stepshim.py reaps a step's task
        p.returncode = 0
        meter.ended("s", task, (ru.ru_utime, ru.ru_stime))
    u = usage.usage_of(meter.stop("s"))
    assert u is not None and u.tasks == 2 and u.source == "rusage"
    assert u.user_s + u.system_s >= 0.45
    assert u.min_cpu_task == 0 and u.min_cpu_s < 0.4
    assert u.rss_kib >= u.max_rss_kib > 0


def test_a_task_that_ended_unwatched_counts_with_its_cpu_and_an_unknown_one_with_samples(
) -> None:
    """After an rnoded restart: a task that ended while it was away is known by its record's
    CPU alone; one whose supervisor went without a word keeps its sampled figures."""
    meter = usage.Meter()
    meter.ended("s", 1, (1.25, 0.5))  # never watched by this rnoded
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        meter.watch("s", {0: sleeper.pid})
    finally:
        sleeper.kill()
        sleeper.wait()
    meter.ended("s", 0, None)
    track = meter.stop("s")
    assert track is not None and all(t.done for t in track.tasks.values())
    u = usage.usage_of(track)
    assert u is not None and u.tasks == 2 and u.source == "proc"  # task 0's CPU was sampled
    assert u.user_s >= 1.25 and u.system_s >= 0.5 and u.min_cpu_task == 0
    assert usage.usage_of(None) is None
    meter.ended("gone", 0, None)  # nothing known of it: no figures
    assert meter.stop("gone") is None


def test_exact_cpu_replaces_the_sampled_and_gpus_are_averaged() -> None:
    meter = usage.Meter()
    track = meter.watch("j", {0: os.getpid()}, gpus=(1,))
    for util in (20.0, 60.0):
        meter.add_gpu_sample([GpuMetrics(0, 99.0, 1, 10, 40.0, 100.0),
                              GpuMetrics(1, util, int(util * 10), 1000, 40.0, 100.0)])
    u = usage.usage_of(track, cpu=(1.25, 0.5), source="rusage", mem_peak_kib=7)
    assert u is not None and (u.user_s, u.system_s, u.source) == (1.25, 0.5, "rusage")
    assert u.mem_peak_kib == 7 and u.max_rss_kib > 0
    assert [attrs.astuple(g) for g in u.gpus] == [(1, 40.0, 60.0, 600, 1000, 2)]
    assert usage.usage_of(None) is None


def test_each_tree_is_looked_at_each_second_then_ever_less_often_up_to_30_s() -> None:
    meter = usage.Meter()
    track = meter.watch("k", {0: os.getpid()})
    now, end, looks = track.due, track.due + 300, [track.due]
    while now < end:
        meter.sample_due(now)
        if not looks or looks[-1] != track.due:
            looks.append(track.due)
        now += usage.TICK
    gaps = [round(b - a, 1) for a, b in itertools.pairwise(looks)]
    assert gaps[:60] == [1.0] * 60 and gaps[60:67] == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_the_job_cgroups_figures_are_read_before_it_goes(tmp_path) -> None:
    """cgroup v2 (cpu.stat, memory.peak) and v1 (memory.max_usage_in_bytes), as the job
    supervisor reads them, and which CPU figures the job's ending takes."""
    from ranch.noded import jobshim
    from ranch.noded.runningjob import measured

    v2, v1 = tmp_path / "v2", tmp_path / "v1"
    v2.mkdir()
    v1.mkdir()
    (v2 / "cpu.stat").write_text("usage_usec 5500000\nuser_usec 4000000\nsystem_usec 1500000\n")
    (v2 / "memory.peak").write_text("134217728\n")
    (v1 / "memory.max_usage_in_bytes").write_text("1048576\n")
    got = jobshim.cgroup_usage([str(v2), 2])
    assert got == {"cg_user_usec": 4000000, "cg_system_usec": 1500000, "cg_mem_peak": 134217728}
    assert jobshim.cgroup_usage([str(v1), 1]) == {"cg_mem_peak": 1048576}
    assert jobshim.cgroup_usage(None) == {} and jobshim.cgroup_usage([str(tmp_path), 2]) == {}
    meter = usage.Meter()
    track = meter.watch("j", {0: os.getpid()})
    u = measured({**got, "user_s": 9.0, "system_s": 9.0}, track)
    assert u is not None and (u.user_s, u.system_s, u.source) == (4.0, 1.5, "cgroup")
    assert u.mem_peak_kib == 131072
    u = measured({"user_s": 2.0, "system_s": 0.25}, track)
    assert u is not None and (u.user_s, u.system_s, u.source) == (2.0, 0.25, "rusage")
    assert measured({}, None) is None


class _Steps(trio.abc.Instrument):
    """How many steps the task named `name` takes."""

    def __init__(self, name: str) -> None:
        self.name, self.steps = name, 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += task.name == self.name


async def test_a_meter_with_no_tree_does_not_wake(autojump_clock: trio.testing.MockClock) -> None:
    """An idle node (no job's tree) costs the meter no wake-up; once a tree is watched it wakes
    every tick again (the tree's own schedule is on the monotonic clock, tested above), and once
    every tree is gone it sleeps again."""
    meter = usage.Meter()
    steps = _Steps("meter")
    trio.lowlevel.add_instrument(steps)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(meter.run, name="meter")
            await trio.sleep(60.0)
            assert steps.steps == 1  # its start, then nothing for a minute
            meter.watch("k", {0: os.getpid()})
            await trio.sleep(4 * usage.TICK)
            assert steps.steps >= 4
            meter.stop("k")
            await trio.sleep(2 * usage.TICK)  # the wake-up under way sees no tree
            before = steps.steps
            await trio.sleep(60.0)
            assert steps.steps == before
            nursery.cancel_scope.cancel()
    finally:
        trio.lowlevel.remove_instrument(steps)
