"""Registration checks as Slurm makes them: hardware below the configured node is invalid."""

from __future__ import annotations

from ranch.conf.model import NodeConfig
from ranch.protocol.messages import Hardware

# Slurm's node_reg_mem_percent: 100 by default, 90 for CLOUD nodes.
MEM_PERCENT = 100
CLOUD_MEM_PERCENT = 90


def hardware_problem(cfg: NodeConfig, hw: Hardware) -> str | None:
    """The reason a registration is invalid (Slurm's wording), or None when it is valid.

    Slurm reports the first shortfall it finds, in this order."""
    if hw.cpus < cfg.cpus:
        return f"Low CPUs (reported:{hw.cpus} < configured:{cfg.cpus})"
    want = cfg.sockets * cfg.cores_per_socket * cfg.threads_per_core
    have = hw.sockets * hw.cores_per_socket * hw.threads_per_core
    if have < want:
        return f"Low socket*core*thread count (reported:{have} < configured:{want})"
    percent = CLOUD_MEM_PERCENT if cfg.state == "CLOUD" else MEM_PERCENT
    if hw.real_memory_mib * 100 < cfg.real_memory * percent:
        return (
            f"Low RealMemory (reported:{hw.real_memory_mib} < {percent}% of "
            f"configured:{cfg.real_memory})"
        )
    if hw.tmp_disk_mib < cfg.tmp_disk:
        return f"Low TmpDisk (reported:{hw.tmp_disk_mib} < configured:{cfg.tmp_disk})"
    if len(hw.gpus) < cfg.gpus:
        return f"Low GPU count (reported:{len(hw.gpus)} < configured:{cfg.gpus})"
    return None
