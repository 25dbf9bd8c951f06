"""A /metrics scrape of a large cluster lets other tasks (heartbeats) run between its chunks."""

from __future__ import annotations

import httpx
import trio

from bench.http_bench import build_cluster
from ranch.conf.model import HttpSettings
from ranch.ctld.daemon import web_ports
from ranch.ctld.web.app import build_app


async def test_scrape_runs_in_chunks_that_let_heartbeats_through() -> None:
    cluster = build_cluster(3000, 2)
    app = build_app(*web_ports(cluster), HttpSettings(listen="127.0.0.1:1", auth="none"))
    ticks = 0
    done = False

    async def heartbeat_stand_in() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await trio.sleep(0)

    transport = httpx.ASGITransport(app=app)
    async with trio.open_nursery() as nursery, httpx.AsyncClient(
            transport=transport, base_url="http://rctld") as client:
        nursery.start_soon(heartbeat_stand_in)
        await trio.sleep(0)
        before = ticks
        r = await client.get("/metrics")
        done = True
    assert r.status_code == 200
    assert r.text.count('slurm_node_cpus{node="') == 3000
    assert r.text.count("DCGM_FI_DEV_GPU_UTIL{") == 6000
    # 3 chunks of nodes for the per-node lines, one for the static text, 3 for the heartbeat
    # figures, one per GPU family: the stand-in ran between them.
    assert ticks - before >= 10  # 4 without the chunks' checkpoints (the transport's own)
