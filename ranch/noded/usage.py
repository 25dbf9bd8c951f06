"""What a job's processes use (issue 48): sampled RSS, VMSize and CPU of each batch script's and
step task's process tree, and of the GPUs a job holds, for racct's MaxRSS/AveRSS/TotalCPU and
rseff.

One Meter per rnoded samples every tracked tree from /proc (one stat read per process, the tree
walked through /proc/PID/task/PID/children) on a schedule of its own: at the start, then every
second for its first minute, then each interval twice the last up to 30 s (Slurm's
JobAcctGatherFrequency default), so a short task's memory is seen as Slurm sampling each second
sees it and a long one costs one look every 30 s (bench/usage_cost.py: 64 steps cost ~0.4 % of
a CPU in their first minute). A step task's CPU is the rusage its supervisor (noded/stepshim.py)
had of it as it reaped it: its own CPU and that of the children it reaped, recorded with its
end in the step's spool record, so a step re-adopted after an rnoded restart has it too.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import attrs
import trio

from ranch.protocol.usage import GpuUse, Usage

log = logging.getLogger("rnoded.usage")

TICK = 0.5  # how often the meter wakes to see which trees are due
FIRST = 1.0  # the interval of a tree's first minute (RAMP)
RAMP = 60.0
LONGEST = 30.0  # the steady interval (Slurm's JobAcctGatherFrequency=30)
TREE_LIMIT = 10_000  # a fork bomb's tree is not walked past this many processes
CLK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def proc_stat(pid: int) -> tuple[float, float, int, int] | None:
    """(user s, system s, RSS KiB, VMSize KiB) of one process: its own CPU and that of the
    children it reaped (a zombie's too). None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2 :].split()
        user = (int(fields[11]) + int(fields[13])) / CLK
        system = (int(fields[12]) + int(fields[14])) / CLK
        return user, system, int(fields[21]) * PAGE_KIB, int(fields[20]) // 1024
    except (OSError, ValueError, IndexError):
        return None


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def tree(root: int, include_root: bool = True) -> list[int]:
    out = [root] if include_root else []
    todo = children(root)
    while todo and len(out) < TREE_LIMIT:
        pid = todo.pop()
        out.append(pid)
        todo += children(pid)
    return out


@attrs.define
class TaskTrack:
    """One task's tree: the largest figures seen."""

    pid: int
    include_root: bool = True  # False for a batch shim: its children are the job
    user_s: float = 0.0
    system_s: float = 0.0
    max_rss_kib: int = 0
    max_vm_kib: int = 0
    done: bool = False  # it ended: its final CPU figures are in, its pid is not looked at
    exact: bool = False  # ... and they are its rusage (else the samples')

    def sample(self) -> None:
        if self.done:  # reaped: its pid may be another process's now
            return
        user = system = 0.0
        rss = vm = 0
        for pid in tree(self.pid, self.include_root):
            got = proc_stat(pid)
            if got is None:
                continue
            user += got[0]
            system += got[1]
            rss += got[2]
            vm += got[3]
        self.max_rss_kib = max(self.max_rss_kib, rss)
        self.max_vm_kib = max(self.max_vm_kib, vm)
        # a live tree's CPU only grows; orphans that left it keep theirs
        self.user_s = max(self.user_s, user)
        self.system_s = max(self.system_s, system)

    def ended(self, cpu: tuple[float, float] | None) -> None:
        """The task was reaped by its supervisor, which read its rusage (user s, system s): its
        own and its reaped children's CPU; None where it could not (the samples stand)."""
        if cpu is not None:
            self.exact = True
            self.user_s = max(self.user_s, cpu[0])
            self.system_s = max(self.system_s, cpu[1])
        self.done = True

    def settle(self, cpu: tuple[float, float]) -> None:
        """Exact CPU (cgroup, rusage) in place of the sampled."""
        self.user_s, self.system_s = cpu


@attrs.define
class GpuTrack:
    util_sum: float = 0.0
    util_max: float = 0.0
    mem_max: int = 0
    mem_total: int = 0
    samples: int = 0

    def add(self, g: Any) -> None:
        """One GpuMetrics sample."""
        self.util_sum += g.util_pct
        self.util_max = max(self.util_max, g.util_pct)
        self.mem_max = max(self.mem_max, g.memory_used_mib)
        self.mem_total = g.memory_total_mib
        self.samples += 1


@attrs.define
class Track:
    tasks: dict[int, TaskTrack] = attrs.Factory(dict)
    gpus: dict[int, GpuTrack] = attrs.Factory(dict)
    delay: float = FIRST
    due: float = 0.0
    born: float = 0.0

    def sample(self, now: float) -> None:
        for task in self.tasks.values():
            task.sample()
        if now - self.born >= RAMP:
            self.delay = min(LONGEST, self.delay * 2)
        self.due = now + self.delay


class Meter:
    """The trees rnoded measures, by key (a job run's or a step's)."""

    def __init__(self, gpu_metrics: Callable[[], Iterable[Any]] | None = None) -> None:
        self.gpu_metrics = gpu_metrics  # GpuSource.metrics: blocking, called in a thread
        self.tracks: dict[Hashable, Track] = {}
        self.looks = 0  # process stat reads, for the bench
        self.busy_s = 0.0  # thread CPU time spent sampling (bench/usage_cost.py)
        # set once a tree is watched: a node with no job's tree has no wake-up of the meter's
        # (its two a second were most of an idle rnoded's CPU, docs/benchmarks.md, issue 50)
        self._watched = trio.Event()

    def watch(self, key: Hashable, tasks: dict[int, int], gpus: Iterable[int] = (),
              include_root: bool = True) -> Track:
        """Start measuring: task id -> pid of each tree, and the GPU indices held."""
        track = self.tracks.get(key)
        if track is None:
            now = time.monotonic()
            # the first look at the next wake-up: a GPU is first sampled then
            track = self.tracks[key] = Track(due=now + TICK, born=now)
        for task, pid in tasks.items():
            track.tasks[task] = TaskTrack(pid, include_root)
            track.tasks[task].sample()  # the start: Slurm's first look is at the task's start
        for index in gpus:
            track.gpus.setdefault(index, GpuTrack())
        self._watched.set()
        return track

    def ended(self, key: Hashable, task: int, cpu: tuple[float, float] | None) -> None:
        """A task of the tree `key` ended, `cpu` its rusage; one not watched (it ended while
        rnoded was away) counts with that CPU alone."""
        track = self.tracks.get(key)
        if track is None or task not in track.tasks:
            if cpu is None:
                return
            track = self.watch(key, {})
            track.tasks[task] = TaskTrack(0)
        track.tasks[task].ended(cpu)

    def stop(self, key: Hashable) -> Track | None:
        return self.tracks.pop(key, None)

    def sample_due(self, now: float) -> bool:
        """Sample the trees that are due; whether any of them holds GPUs."""
        started = time.thread_time()
        gpus = False
        for track in list(self.tracks.values()):
            if track.due > now:
                continue
            track.sample(now)
            self.looks += len(track.tasks)
            gpus = gpus or bool(track.gpus)
        self.busy_s += time.thread_time() - started
        return gpus

    def add_gpu_sample(self, metrics: Iterable[Any]) -> None:
        by_index = {g.index: g for g in metrics}
        for track in self.tracks.values():
            for index, acc in track.gpus.items():
                if index in by_index:
                    acc.add(by_index[index])

    async def run(self) -> None:
        """The sampling loop (in the job runner's nursery)."""
        while True:
            if not self.tracks:  # nothing to look at until a tree is watched
                if self._watched.is_set():
                    self._watched = trio.Event()
                await self._watched.wait()
            await trio.sleep(TICK)
            if not self.sample_due(time.monotonic()) or self.gpu_metrics is None:
                continue
            try:
                metrics = await trio.to_thread.run_sync(self.gpu_metrics,
                                                        abandon_on_cancel=True)
            except Exception as exc:  # a GPU that stops answering must not stop the meter
                log.debug("GPU metrics not read: %s", exc)
                continue
            self.add_gpu_sample(metrics)


def usage_of(track: Track | None, cpu: tuple[float, float] | None = None, source: str = "proc",
             mem_peak_kib: int = 0) -> Usage | None:
    """The figures of a finished track. `cpu`: exact (user, system) seconds from the cgroup or
    rusage, which replace the sampled ones (the track's single task then holds them all). The
    memory figures are the samples' (as Slurm's jobacct_gather): rusage's ru_maxrss counts the
    forking parent's pages before the exec."""
    if track is None or not track.tasks:
        return None
    tasks = sorted(track.tasks.items())
    if cpu is not None and len(tasks) == 1:
        tasks[0][1].settle(cpu)
    elif cpu is None:
        source = "rusage" if all(t.exact for _, t in tasks) else "proc"
    user = sum(t.user_s for _, t in tasks)
    system = sum(t.system_s for _, t in tasks)
    most_rss = max(tasks, key=lambda kv: kv[1].max_rss_kib)
    most_vm = max(tasks, key=lambda kv: kv[1].max_vm_kib)
    least_cpu = min(tasks, key=lambda kv: kv[1].user_s + kv[1].system_s)
    gpus = tuple(GpuUse(i, round(g.util_sum / g.samples, 1) if g.samples else 0.0, g.util_max,
                        g.mem_max, g.mem_total, g.samples)
                 for i, g in sorted(track.gpus.items()))
    return Usage(
        user_s=round(user, 3), system_s=round(system, 3), tasks=len(tasks),
        max_rss_kib=most_rss[1].max_rss_kib, max_rss_task=most_rss[0],
        rss_kib=sum(t.max_rss_kib for _, t in tasks),
        max_vm_kib=most_vm[1].max_vm_kib, max_vm_task=most_vm[0],
        vm_kib=sum(t.max_vm_kib for _, t in tasks),
        min_cpu_s=round(least_cpu[1].user_s + least_cpu[1].system_s, 3),
        min_cpu_task=least_cpu[0], mem_peak_kib=mem_peak_kib, source=source, gpus=gpus)
