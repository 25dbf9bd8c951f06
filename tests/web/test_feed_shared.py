"""The page's feed at scale: built a chunk at a time (heartbeats run between the chunks), once
per version however many pages ask at once, from the node records with the figures the
snapshot's records give; and a change stream's frame is built once for every open page."""

from __future__ import annotations

import httpx
import orjson
import trio

from bench.http_bench import build_cluster
from ranch.conf.model import HttpSettings
from ranch.ctld.daemon import web_ports
from ranch.ctld.web.app import build_app
from ranch.ctld.web.grid import node_columns
from ranch.ctld.web.live import Live
from ranch.protocol import messages as m


async def test_feed_is_built_in_chunks_once_for_pages_asking_together() -> None:
    cluster = build_cluster(3000, 2)
    app = build_app(*web_ports(cluster), HttpSettings(listen="127.0.0.1:1", auth="none"))
    ticks, done = 0, False

    async def heartbeat_stand_in() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await trio.sleep(0)

    replies: list[httpx.Response] = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://rctld") as client:
        async def page() -> None:
            replies.append(await client.get("/ui/grid.json"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(heartbeat_stand_in)
            await trio.sleep(0)
            before = ticks
            async with trio.open_nursery() as pages:
                for _ in range(5):
                    pages.start_soon(page)
            done = True
        feed = app.state.web.feed
        assert ticks - before >= 3  # 3 chunks of 1,000 nodes: the stand-in ran between them
        assert feed._builds == 1, "five pages asking at once share one build"
        assert len({r.content for r in replies}) == 1 and len({r.headers["etag"]
                                                                for r in replies}) == 1
        again = await client.get("/ui/grid.json", headers={"If-None-Match": replies[0]
                                                           .headers["etag"]})
        assert again.status_code == 304 and feed._builds == 1
        # A state change shows at once (a new version), heartbeat figures or not.
        name = next(iter(cluster.nodes))
        cluster.update_nodes(m.UpdateNodes(name, "DRAIN", "feed test", "alice"))
        doc = (await client.get("/ui/grid.json")).json()
    assert feed._builds == 2
    cols = doc["nodes"]
    assert doc["states"][cols["state"][0]] == "drained"
    assert doc["reasons"][cols["reason"][0]][:2] == ["feed test", "alice"]
    # The figures the snapshot's records give, read here straight from the packed metrics.
    snap = cluster.snapshot(metrics=True)
    assert cols["name"] == [r["name"] for r in snap.nodes]
    for i, rec in enumerate(snap.nodes):
        want = node_columns(rec)
        got = (cols["cpu"][i], cols["mem"][i], cols["gpu"][i], cols["temp"][i])
        assert got == want[:4], rec["name"]
        assert cols["cpus"][i] == [rec["cpus_alloc"], rec["cpus"]]
    assert [p["name"] for p in doc["partitions"]] == [p["name"] for p in snap.partitions]
    assert len(doc["partitions"][0]["members"]) == 3000


def test_one_frame_is_built_for_every_page_that_takes_the_same_batch() -> None:
    cluster = build_cluster(50, 0)
    nodes, jobs, events, *_ = web_ports(cluster)
    live = Live(nodes, jobs, events, lambda r: None, lambda r: None)
    name = next(iter(cluster.nodes))
    cluster.update_nodes(m.UpdateNodes(name, "DRAIN", "frame test", "alice"))
    batch = events.query()[-1:]
    first = live._frame(batch, 0, True)
    assert live._frame(list(batch), 0, True) is first  # the second page: the same bytes
    assert live._frame(batch, 0, False) is not first  # no timeline rights: its own frame
    doc = orjson.loads(first.split(b"data: ", 1)[1])
    assert doc["nodes"][name]["long"] == "drained"
