"""The web page at scale: page weight and render time of N nodes in headless chromium.

    python bench/page_bench.py [--nodes 10000] [--gpus 8] [--jobs 50000] [--screenshot FILE]

An in-process controller (bench/http_bench.py's cluster: every node registered, with heartbeat
figures, one in 97 drained) serves the real app with hypercorn in a thread; chromium (over the
DevTools pipe, tests/web/cdp.py) loads the page. Printed: bytes over the wire for the first view
(HTML, CSS, JS, the gzip feed), time from navigation to the grid fully drawn, and the time one
refresh (a new feed of every node) takes in the page.

Issue 45 adds: --jobs jobs (a fifth submitted, started where nodes have room, the rest finished,
in a job history of day files that the History tab reads), the History tab's first search in the
page, the controller's CPU for one live refresh (a drain reaching the open page through
/ui/stream) and for the old whole-grid refetch after it, and the heartbeat handling delay
(p50/p99 of how late a heartbeat due every millisecond runs on the controller's loop, while
nodes change state every 100 ms) with no page open and with ten (one chromium page and nine
stream readers: the controller cannot tell them apart).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from http_bench import build_cluster

from ranch.conf.model import HttpSettings
from ranch.ctld.daemon import web_ports
from ranch.ctld.web.server import serve_http
from ranch.protocol import messages as m
from tests.integration.cluster import free_port
from tests.web.cdp import Browser, find_chromium


def serve_in_thread(cluster, port: int) -> dict:
    """The app on its own trio loop; returns {"token": the loop's TrioToken} once it runs."""
    settings = HttpSettings(listen=f"127.0.0.1:{port}", token_file=None, auth="loopback")
    box: dict = {}

    async def both() -> None:
        box["token"] = trio.lowlevel.current_trio_token()
        await serve_http(*web_ports(cluster), settings)

    threading.Thread(target=lambda: trio.run(both), daemon=True).start()
    return box


def add_jobs(cluster, total: int, history) -> int:
    """A fifth of `total` submitted (they start where the nodes have room), the rest in the job
    history's day files (`history`: the FileHistory the controller was assembled with)."""
    live = total // 5
    for i in range(live):
        cluster.jobs.submission.submit(m.SubmitJob("#!/bin/sh\ntrue\n", "alice", 1000, 1000, "/tmp",
                                        name=f"q{i}", account="physics"))
    end0 = 1.7e9
    batch = []
    for i in range(total - live):
        end = end0 - 5 * i
        batch.append({"job_id": 10_000_000 + i, "name": f"h{i}", "user": ("alice", "bob")[i % 2],
                      "uid": (1000, 1001)[i % 2], "gid": 1000, "partition": "sim",
                      "account": ("physics", "chem", "bio")[i % 3],
                      "state": ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")[i % 4],
                      "exit_code": i % 4 == 1, "signal": 0, "submit_time": end - 600,
                      "start_time": end - 500, "end_time": end, "nodes": "sim00001",
                      "node_count": 1, "cpus": 64, "restarts": 0, "batch_flag": 1})
    history.write(batch)
    return live


def live_streams(cluster) -> int:
    """Open /ui/stream readers: the followers the event log's page hub feeds."""
    from ranch.ctld.web.live import Hub
    hubs = [f for f in cluster.controller.eventlog.followers if isinstance(f, Hub)]
    return sum(len(h.streams) for h in hubs)


def cpu_of(fn) -> float:
    """Process CPU seconds fn's span took (the browser is another process)."""
    t = time.process_time()
    fn()
    return time.process_time() - t


def heartbeat_delays(cluster, token, seconds: float) -> tuple[float, float]:
    """(p50, p99) ms: how late a heartbeat due every millisecond starts on the loop, while one
    node is drained and resumed every 100 ms (changes the stream carries)."""
    names = list(cluster.nodes)
    hb = m.Heartbeat(names[1], 1, None)

    async def run() -> list[float]:
        late: list[float] = []
        end = trio.current_time() + seconds

        async def churn() -> None:
            i = 0
            while trio.current_time() < end:
                name = names[(i // 2) % len(names)]
                state = "DRAIN" if i % 2 == 0 else "RESUME"
                cluster.update_nodes(m.UpdateNodes(name, state, "bench churn", "alice"))
                i += 1
                await trio.sleep(0.1)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(churn)
            due = trio.current_time()
            while due < end:
                due += 0.001
                await trio.sleep_until(due)
                late.append(trio.current_time() - due)
                cluster.heartbeat(hb, cluster.nodes[hb.name].conn)
        return late

    late = sorted(trio.from_thread.run(run, trio_token=token))
    return (round(1000 * late[len(late) // 2], 2), round(1000 * late[int(len(late) * 0.99)], 2))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=5.0, help="per heartbeat measurement")
    ap.add_argument("--screenshot", help="write a PNG of the page here")
    args = ap.parse_args()
    chromium = find_chromium()
    if chromium is None:
        print("page_bench: no chromium on PATH; install Debian's `chromium`")
        return 1
    from ranch.ctld import gctune
    from ranch.ctld.jobs.history import FileHistory

    # The collector as rctld sets it (ctld/main.py): under Python's default thresholds full
    # passes over this heap (50,000 jobs, 10,000 nodes) paused the loop 100-300 ms while pages
    # were open, which rctld never sees.
    gctune.configure()
    history = FileHistory(tempfile.mkdtemp(prefix="ranch-page-bench-"))
    cluster = build_cluster(args.nodes, args.gpus, history=history)
    pending = add_jobs(cluster, args.jobs, history)
    gctune.freeze_startup_heap()  # as rctld does once it is up
    port = free_port()
    box = serve_in_thread(cluster, port)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(base + "/", timeout=2)
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    heartbeats = {"heartbeat_late_ms_no_page_p50_p99": heartbeat_delays(
        cluster, box["token"], args.seconds)}
    weight = {}
    for path in ("/", "/static/app.css", "/static/app.js", "/ui/grid.json"):
        r = httpx.get(base + path, headers={"Accept-Encoding": "gzip"}, timeout=30)
        weight[path] = int(r.headers.get("content-length") or len(r.content))
    raw_feed = len(httpx.get(base + "/ui/grid.json", headers={"Accept-Encoding": "identity"},
                             timeout=30).content)
    with Browser(chromium, 1600, 1000) as b:
        t0 = time.monotonic()
        b.open(base + "/")
        b.wait_js(f"document.querySelectorAll('#grid .c[data-state]').length === {args.nodes}",
                  timeout=60, what="every node drawn")
        first_draw_s = time.monotonic() - t0
        nav_ms = b.js("performance.now()")
        # when the page had built the grid's cells (app.js marks it), free of the 0.1 s polling
        built_ms = b.js("(performance.getEntriesByName('ranch-grid-built')[0] || {}).startTime")
        # the first feed's fetch in the page: asked at, answered (last byte) at
        feed_timing = b.js("(() => { const e = performance.getEntriesByType('resource')"
                           ".find(x => x.name.includes('/ui/grid.json'));"
                           " return e ? [Math.round(e.startTime), Math.round(e.responseEnd)]"
                           " : null; })()")
        # One full refresh in the page: re-apply a fresh feed to every cell.
        refresh_ms = b.js("(async () => { etag = null; const t = performance.now();"
                          " const r = await fetch('/ui/grid.json', {cache: 'no-store'});"
                          " feed = await r.json(); render();"
                          " return performance.now() - t; })()")
        filter_ms = b.js("(() => { const t = performance.now();"
                         " document.getElementById('f-state').value = 'drained';"
                         " applyFilters(); const d = performance.now() - t;"
                         " document.getElementById('f-state').value = ''; applyFilters();"
                         " return d; })()")
        # The History tab: its first search (a day of the 40,000 finished jobs' window).
        b.js("location.hash = '#history'")
        b.wait_js("document.getElementById('h-shown').textContent.endsWith('jobs')"
                  " || document.getElementById('h-shown').textContent.includes('more')",
                  timeout=60, what="the history")
        history_ms = b.js("(async () => { const t = performance.now();"
                          " document.getElementById('h-start').value = '2023-11-13T00:00';"
                          " document.getElementById('h-shown').textContent = '';"
                          " await loadHistory(); return performance.now() - t; })()")
        b.js("location.hash = '#nodes'")
        # One live refresh: a drain reaches the open page through the stream, no refetch.
        b.wait_js("streamLive === true", timeout=30, what="the stream open")
        token = box["token"]
        name = sorted(cluster.nodes)[5]

        def live_refresh() -> None:
            trio.from_thread.run_sync(cluster.update_nodes, m.UpdateNodes(
                name, "DRAIN", "bench: live", "alice"), trio_token=token)
            b.wait_js(f"document.querySelector('#grid .c[data-name={name}]').dataset.state"
                      ".startsWith('drain')", timeout=30, what="the drain on the page")

        def full_refetch() -> None:  # what a page did before the stream: the whole grid
            httpx.get(base + "/ui/grid.json", headers={"Accept-Encoding": "gzip"}, timeout=30)

        live_cpu = cpu_of(live_refresh)
        stream_kept = b.js("streamLive")  # the page still on the stream after the change
        trio.from_thread.run_sync(cluster.update_nodes, m.UpdateNodes(
            name, "RESUME", "", "alice"), trio_token=token)
        full_cpu = cpu_of(full_refetch)
        # Ten pages: this one and nine more readers of the stream, each its own process as a
        # browser is (readers on threads of this process took the controller's GIL from it at
        # every frame: the figure was the bench's own contention).
        readers = [subprocess.Popen(["curl", "-sN", base + "/ui/stream"],
                                    stdout=subprocess.DEVNULL) for _ in range(9)]
        try:
            deadline = time.monotonic() + 30
            while trio.from_thread.run_sync(live_streams, cluster, trio_token=token) < 10:
                if time.monotonic() > deadline:
                    raise RuntimeError("the nine stream readers never connected")
                time.sleep(0.1)
            hb_ten = heartbeat_delays(cluster, token, args.seconds)
        finally:
            for r in readers:
                r.terminate()
                r.wait()
        heartbeats["heartbeat_late_ms_ten_pages_p50_p99"] = hb_ten
        if args.screenshot:
            b.js("document.querySelector('#grid .c:nth-child(98)').click()")
            time.sleep(0.3)
            b.screenshot(args.screenshot)
    figures = {
        "nodes": args.nodes,
        "page_bytes_first_view": sum(weight.values()),
        "bytes_by_path": weight,
        "feed_bytes_uncompressed": raw_feed,
        "grid_drawn_s": round(first_draw_s, 2),
        "page_clock_at_drawn_ms": round(nav_ms),
        "page_clock_at_grid_built_ms": round(built_ms) if built_ms is not None else None,
        "page_clock_feed_asked_answered_ms": feed_timing,
        "refresh_fetch_and_render_ms": round(refresh_ms),
        "state_filter_ms": round(filter_ms),
        "jobs_live": pending, "jobs_in_history": args.jobs - pending,
        "history_search_ms": round(history_ms),
        "live_refresh_ctld_cpu_ms": round(1000 * live_cpu, 1),
        "full_refetch_ctld_cpu_ms": round(1000 * full_cpu, 1),
        "page_still_on_stream": stream_kept,
        **heartbeats,
    }
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
