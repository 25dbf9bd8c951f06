"""The one cluster both systems build: names, sizes and job timings the scenarios rely on."""

from __future__ import annotations

import os

import attrs


def _memory_mib() -> int:
    """RealMemory both daemons accept: well below what this machine has."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError):
        total = 1024
    return max(64, min(1000, total // 4))


@attrs.frozen
class Shape:
    cluster: str = "conf"
    partition: str = "main"
    nodes: tuple[str, ...] = ("c1", "c2")
    cpus: int = 2  # per node; at most what this machine has (Ranch checks it as Slurm does)
    memory_mib: int = attrs.field(factory=_memory_mib)
    kill_wait: int = 2  # seconds between SIGTERM and SIGKILL
    min_job_age: int = 3600  # finished jobs stay listed for the whole session
    inactive_limit: int = 0  # seconds an allocation outlives its silent salloc (0: no limit)

    def global_conf(self) -> str:
        """The slurm.conf settings both systems read, word for word."""
        return (f"ClusterName={self.cluster}\n"
                f"KillWait={self.kill_wait}\n"
                f"MinJobAge={self.min_job_age}\n"
                f"InactiveLimit={self.inactive_limit}\n"
                "OverTimeLimit=0\n")

    def nodes_conf(self, extra: dict[str, str] | None = None) -> str:
        """NodeName and PartitionName lines; `extra` adds words to a node's line (Slurm's
        NodeHostname/Port, which Ranch's configless nodes do not need)."""
        extra = extra or {}
        lines = [f"NodeName={n} CPUs={self.cpus} RealMemory={self.memory_mib}"
                 + (f" {extra[n]}" if extra.get(n) else "") for n in self.nodes]
        lines.append(f"PartitionName={self.partition} Nodes={','.join(self.nodes)} Default=YES "
                     "MaxTime=INFINITE State=UP")
        return "\n".join(lines) + "\n"


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


SHAPE = Shape(cpus=min(2, usable_cpus()))
