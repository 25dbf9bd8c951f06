"""What a job's processes used on one node (issue 48): rnoded measures a batch script or a step's
tasks there and sends the figures with the JobEnd or StepEnd; rctld keeps them for racct/rseff."""

from __future__ import annotations

import attrs


@attrs.frozen
class GpuUse:
    """One GPU the job held here, sampled while it ran (NVML, or the fake GPUs)."""

    index: int
    util_ave: float = 0.0  # percent, the mean of the samples
    util_max: float = 0.0
    mem_max_mib: int = 0  # the most memory in use on the GPU
    mem_total_mib: int = 0
    samples: int = 0


@attrs.frozen
class Usage:
    """A batch script's or a step's figures on one node. CPU seconds are those of the reaped
    process tree (cgroup cpu.stat or wait4's rusage for a batch script; each task's own and its
    reaped children's for a step); memory is sampled (KiB) per task: its largest RSS and VMSize,
    their sum over the tasks here (sacct's TRESUsageInTot), and the task that had the most."""

    user_s: float = 0.0
    system_s: float = 0.0
    tasks: int = 0  # tasks measured here
    max_rss_kib: int = 0
    max_rss_task: int = 0
    rss_kib: int = 0  # sum over the tasks of each one's largest RSS
    max_vm_kib: int = 0
    max_vm_task: int = 0
    vm_kib: int = 0
    min_cpu_s: float = 0.0  # the task that used the least CPU, and which
    min_cpu_task: int = 0
    mem_peak_kib: int = 0  # the job cgroup's peak (page cache included), 0 where none
    source: str = ""  # where the CPU figures come from: cgroup | rusage | proc
    gpus: tuple[GpuUse, ...] = ()
