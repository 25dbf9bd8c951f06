"""Plausible heartbeat metrics, built once: a pool of Metrics values nodes cycle through, so a
heartbeat costs one attrs construction, not a fresh random draw per figure."""

from __future__ import annotations

import random

from fleet_lib.config import FleetShape
from ranch.protocol.messages import GpuMetrics, Metrics

POOL_SIZE = 64


def metrics_pool(shape: FleetShape, size: int = POOL_SIZE, seed: int = 7) -> tuple[Metrics, ...]:
    """`size` Metrics of a busy GPU node: a slow random walk, so neighbours in the pool differ a
    little as consecutive readings of a real node would."""
    rnd = random.Random(seed)
    cpu, load, mem = 35.0, 12.0, shape.real_memory_mib * 0.3
    gpu_util = [rnd.uniform(20, 90) for _ in range(shape.gpus)]
    pool = []
    for _ in range(size):
        cpu = min(100.0, max(0.0, cpu + rnd.gauss(0, 4)))
        load = max(0.0, load + rnd.gauss(0, 0.8))
        mem = min(shape.real_memory_mib * 0.95, max(4096.0, mem + rnd.gauss(0, 2000)))
        gpus = []
        for g in range(shape.gpus):
            gpu_util[g] = min(100.0, max(0.0, gpu_util[g] + rnd.gauss(0, 5)))
            util = gpu_util[g]
            gpus.append(
                GpuMetrics(
                    index=g,
                    util_pct=round(util, 1),
                    memory_used_mib=int(shape.gpu_memory_mib * (0.1 + 0.8 * util / 100)),
                    memory_total_mib=shape.gpu_memory_mib,
                    temperature_c=round(34 + 0.45 * util + rnd.uniform(-1, 1), 1),
                    power_w=round(70 + 6.3 * util + rnd.uniform(-5, 5), 1),
                )
            )
        max_temp = max([g.temperature_c for g in gpus], default=45.0)
        pool.append(
            Metrics(
                cpu_pct=round(cpu, 1),
                load_1m=round(load, 2),
                memory_used_mib=int(mem),
                memory_total_mib=shape.real_memory_mib,
                max_temperature_c=max_temp,
                gpus=tuple(gpus),
            )
        )
    return tuple(pool)


def cache_unstructured(pool: tuple[Metrics, ...]) -> None:
    """Make the codec's converter (in this process only) reuse the unstructured form of each
    pooled Metrics: the body bytes are the same, the per-heartbeat cattrs walk over 8 GPUs is
    gone. Must run before the first Heartbeat is encoded (cattrs compiles hooks lazily)."""
    from ranch.protocol.codec import converter

    default = converter.get_unstructure_hook(Metrics)
    cached = {id(mt): default(mt) for mt in pool}

    def unstructure(mt: Metrics) -> dict:
        hit = cached.get(id(mt))
        return hit if hit is not None else default(mt)

    converter.register_unstructure_hook(Metrics, unstructure)
