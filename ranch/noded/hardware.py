"""What this machine is (Hardware, like `slurmd -C`) and how busy it is (Metrics): psutil + /sys.

Every function here blocks; daemons call them through trio.to_thread.run_sync.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import time
from pathlib import Path

import psutil

from ranch.noded.gpus import GpuSource
from ranch.protocol.messages import Hardware, Metrics

MIB = 1 << 20
SYS_CPU = Path("/sys/devices/system/cpu")
SYS_NODE = Path("/sys/devices/system/node")


def short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def count_sockets(sys_cpu: Path = SYS_CPU) -> int:
    ids = set()
    for path in sys_cpu.glob("cpu[0-9]*/topology/physical_package_id"):
        try:
            ids.add(path.read_text().strip())
        except OSError:
            continue
    return max(1, len(ids))


def count_numa_nodes(sys_node: Path = SYS_NODE) -> int:
    return max(1, sum(1 for p in sys_node.glob("node[0-9]*") if re.fullmatch(r"node\d+", p.name)))


def topology(cpus: int, cores: int, sockets: int) -> tuple[int, int, int]:
    """(sockets, cores per socket, threads per core) multiplying to `cpus`; when the numbers
    do not fit (a container sees part of a machine), every CPU is a core of one socket."""
    threads = cpus // cores if cores and cpus % cores == 0 else 1
    if sockets and cores % sockets == 0 and sockets * (cores // sockets) * threads == cpus:
        return sockets, cores // sockets, threads
    return 1, cpus, 1


def probe_hardware(gpus: GpuSource, tmp_dir: str = "/tmp") -> Hardware:
    cpus = psutil.cpu_count(logical=True) or 1
    cores = psutil.cpu_count(logical=False) or cpus
    sockets, cores_per_socket, threads = topology(cpus, cores, count_sockets())
    try:
        tmp_disk = psutil.disk_usage(tmp_dir).total // MIB
    except OSError:
        tmp_disk = 0
    return Hardware(
        cpus=cpus,
        boards=1,
        sockets=sockets,
        cores_per_socket=cores_per_socket,
        threads_per_core=threads,
        real_memory_mib=psutil.virtual_memory().total // MIB,
        tmp_disk_mib=tmp_disk,
        numa_nodes=count_numa_nodes(),
        gpus=gpus.infos(),
        os=f"{platform.system()} {platform.release()}",
        arch=platform.machine(),
        hostname=socket.gethostname(),
    )


def max_temperature() -> float | None:
    reader = getattr(psutil, "sensors_temperatures", None)
    try:
        sensors = reader() if reader else {}
    except (OSError, RuntimeError):
        return None
    temps = [t.current for entries in sensors.values() for t in entries if t.current]
    return max(temps) if temps else None


def probe_metrics(gpus: GpuSource) -> Metrics:
    mem = psutil.virtual_memory()
    return Metrics(
        cpu_pct=psutil.cpu_percent(interval=None),  # since the previous call: no sleeping
        load_1m=os.getloadavg()[0],
        memory_used_mib=(mem.total - mem.available) // MIB,
        memory_total_mib=mem.total // MIB,
        max_temperature_c=max_temperature(),
        gpus=gpus.metrics(),
    )


def format_uptime(seconds: float) -> str:
    """Slurm's D-HH:MM:SS."""
    secs = max(0, int(seconds))
    days, secs = divmod(secs, 86400)
    return f"{days}-{secs // 3600:02d}:{secs % 3600 // 60:02d}:{secs % 60:02d}"


def slurmd_c_text(name: str, hw: Hardware, boot_time: float, now: float | None = None) -> str:
    """The two lines `rnoded -C` prints, in the shape of `slurmd -C`."""
    words = [
        f"NodeName={name}",
        f"CPUs={hw.cpus}",
        f"Boards={hw.boards}",
        f"SocketsPerBoard={hw.sockets // max(1, hw.boards)}",
        f"CoresPerSocket={hw.cores_per_socket}",
        f"ThreadsPerCore={hw.threads_per_core}",
        f"RealMemory={hw.real_memory_mib}",
    ]
    if hw.gpus:
        words.append(f"Gres=gpu:{len(hw.gpus)}")
    uptime = (time.time() if now is None else now) - boot_time
    return " ".join(words) + f"\nUpTime={format_uptime(uptime)}\n"
