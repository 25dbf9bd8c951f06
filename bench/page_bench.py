"""The web page at scale: page weight and render time of N nodes in headless chromium.

    python bench/page_bench.py [--nodes 10000] [--gpus 8] [--screenshot FILE]

An in-process controller (bench/http_bench.py's cluster: every node registered, with heartbeat
figures, one in 97 drained) serves the real app with hypercorn in a thread; chromium (over the
DevTools pipe, tests/web/cdp.py) loads the page. Printed: bytes over the wire for the first view
(HTML, CSS, JS, the gzip feed), time from navigation to the grid fully drawn, and the time one
refresh (a new feed of every node) takes in the page.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from http_bench import build_cluster

from ranch.conf.model import HttpSettings
from ranch.ctld.web.server import serve_http
from tests.integration.cluster import free_port
from tests.web.cdp import Browser, find_chromium


def serve_in_thread(cluster, port: int) -> None:
    settings = HttpSettings(listen=f"127.0.0.1:{port}", token_file=None, auth="loopback")

    def run() -> None:
        trio.run(serve_http, cluster, settings)

    threading.Thread(target=run, daemon=True).start()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--screenshot", help="write a PNG of the page here")
    args = ap.parse_args()
    chromium = find_chromium()
    if chromium is None:
        print("page_bench: no chromium on PATH; install Debian's `chromium`")
        return 1
    cluster = build_cluster(args.nodes, args.gpus)
    port = free_port()
    serve_in_thread(cluster, port)
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
        "refresh_fetch_and_render_ms": round(refresh_ms),
        "state_filter_ms": round(filter_ms),
    }
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
