"""The starlette application: JSON API, /metrics, the web page and its feed.

Reads answer from the controller's cached snapshot (the records rinfo and rcontrol get, turned
into documents by ranch.protocol.records, the code they use too); writes go through
WebAdmin.update_nodes, the path of `rcontrol update`, with the token's name as the user.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import orjson
import trio
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.rpc import permissions
from ranch.ctld.web import grid, jobstats, metrics, schedmetrics
from ranch.ctld.web.admin import Admin
from ranch.ctld.web.gate import Gate, peer
from ranch.ctld.web.jobroutes import API_VERSION, JobRoutes
from ranch.ctld.web.limits import BodyTooLarge, read_body
from ranch.ctld.web.live import Live
from ranch.ctld.web.pages import Pages
from ranch.ctld.web.panes import Panes
from ranch.ctld.web.responses import Json
from ranch.ctld.web.responses import error as _error
from ranch.ctld.web.restd import Restd
from ranch.ctld.web.usage import Usage
from ranch.protocol import messages as m
from ranch.protocol.records import (
    node_json,
    partition_json,
    show_doc,
)
from ranch.protocol.sinforecords import sinfo_doc
from ranch.statemachine import events
from ranch.statemachine.events import REASON_REQUIRED_MESSAGE
from ranch.statemachine.predicates import reason_required

if TYPE_CHECKING:
    from ranch.ctld.site import Site
    from ranch.ctld.web.webports import (
        Health,
        ReservationBook,
        WebAdmin,
        WebDurability,
        WebEvents,
        WebJobs,
        WebNodes,
    )

POLL_SECONDS = 3
FEED_STALENESS = 1.0  # seconds the feed's heartbeat figures may lag
# The page has Drain/Resume buttons: it may not be framed by another site (clickjacking), and it
# runs only its own script and style (no inline code a crafted node name could smuggle in).
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_WRITE_KEYS = ("state", "reason")


class Web:
    """The routes, bound to one running controller through its ports (ctld/web/webports.py)."""

    def __init__(self, nodes: WebNodes, jobs: WebJobs, events: WebEvents, admin: WebAdmin,
                 reservations: ReservationBook, health: Health, site: Site, settings: Any,
                 durability: WebDurability | None = None) -> None:
        self.nodes_view, self.jobs_view, self.events, self.admin = nodes, jobs, events, admin
        self.reservations_book, self.health, self.site = reservations, health, site
        # None only for tests of the routes alone (nothing is persisted there)
        self.durability = durability
        self.gate = Gate(nodes, settings.auth, settings.token_file)
        self.expo = metrics.Exposition()
        self.feed = grid.Feed()
        self._metrics_lock = trio.Lock()  # one scrape builds at a time; others wait for it
        self._feed_lock = trio.Lock()  # so does the page's feed
        self._nodes_for: Any = None  # the snapshot _nodes_docs were made from
        self._nodes_docs: list[dict] = []
        self.job_routes = JobRoutes(nodes, jobs, self.gate)  # the job listings
        env = Environment(loader=PackageLoader("ranch.ctld.web", "templates"),
                          autoescape=select_autoescape())
        self.page = env.get_template("index.html")

    async def not_on_disk(self) -> str | None:
        """None once every change made so far is on disk, so a write's reply may leave (the
        rule of every reply, ctld/state/durability.py); else why it is not."""
        if self.durability is None:
            return None
        try:
            await self.durability.durable()
        except OSError as exc:
            logs.event("http reply held: the change is not on disk", logging.ERROR,
                       error=exc.strerror or str(exc))
            return f"the change is made but not yet on disk ({exc.strerror or exc}); rctld " \
                   f"retries the write"
        return None

    async def submit(self, msg: m.SubmitJob) -> m.SubmitReply | m.Error:
        """rbatch's submission: checked, queued, on disk before the reply (and retracted if the
        write fails: never acknowledged, never run), or only checked and queued in tests."""
        if self.durability is None:
            return self.jobs_view.submit(msg)
        return await self.durability.submit(msg)

    # -- reads -----------------------------------------------------------------------------

    def _meta_doc(self, key: str, items: list, request: Request) -> dict:
        return show_doc(key, items, self.nodes_view.config.cluster_name, version=API_VERSION,
                        user="", command=[request.method, request.url.path])

    async def nodes(self, request: Request) -> Response:
        if (refused := self.gate.read_refusal(request, "nodes")) is not None:
            return refused
        snap = self.nodes_view.snapshot()
        if self._nodes_for is not snap:
            docs = []
            for i, rec in enumerate(snap.nodes):
                docs.append(node_json(rec))
                if i % grid.CHUNK == grid.CHUNK - 1:
                    await trio.sleep(0)  # 10,000 records take ~0.15 s: let heartbeats in
            self._nodes_docs, self._nodes_for = docs, snap
        return Json(self._meta_doc("nodes", self._nodes_docs, request))

    async def node(self, request: Request) -> Response:
        if (refused := self.gate.read_refusal(request, "nodes")) is not None:
            return refused
        expr = request.path_params["name"]
        try:
            wanted = hostlist.expand(expr)
        except ValueError as exc:
            return _error(400, f"bad node name or hostlist {expr!r}: {exc}", "name")
        by_name = {n["name"]: n for n in self.nodes_view.snapshot().nodes}
        missing = [w for w in wanted if w not in by_name]
        if missing:
            return _error(404, f"Node {hostlist.fold(missing, sort=False)} not found", "name")
        docs = [node_json(by_name[w]) for w in dict.fromkeys(wanted)]
        return Json(self._meta_doc("nodes", docs, request))

    async def partitions(self, request: Request) -> Response:
        if (refused := self.gate.read_refusal(request)) is not None:
            return refused
        snap = self.nodes_view.snapshot()
        by_name = {n["name"]: n for n in snap.nodes}
        docs = [partition_json(p, by_name, hostlist.fold, snap.cluster_name)
                for p in snap.partitions]
        return Json(self._meta_doc("partitions", docs, request))

    async def sinfo(self, request: Request) -> Response:
        if (refused := self.gate.read_refusal(request, "nodes")) is not None:
            return refused
        snap = self.nodes_view.snapshot()
        doc = sinfo_doc(list(snap.nodes), list(snap.partitions), hostlist.fold,
                        cluster=snap.cluster_name, version=API_VERSION,
                        argv=[request.method, request.url.path], user="")
        return Json(doc)

    async def metrics(self, request: Request) -> Response:
        if (refused := self.gate.read_refusal(request, "nodes")) is not None:
            return refused
        out: list[bytes] = []
        async with self._metrics_lock:
            for _ in self.expo.steps(self.nodes_view.nodes, out):
                await trio.sleep(0)  # let heartbeats in between chunks

        out.append(jobstats.metrics_text(self.job_routes.counts()).encode())
        out.append(schedmetrics.scheduler_text(self.jobs_view.sched_stats()).encode())
        out.append(metrics.guards_text(tuple(g.status() for g in self.health.guards),
                                       self.health.stalls.status()).encode())
        out.append(metrics.reservations_text(self.reservations_book.handle(
            m.ReservationRequest(action="show")).reservations).encode())

        async def pieces() -> AsyncIterator[bytes]:
            # Sent chunk by chunk: no 30 MB join, and heartbeats run between the pieces.
            for piece in out:
                yield piece

        return StreamingResponse(pieces(), media_type=metrics.CONTENT_TYPE)

    async def reservations(self, request: Request) -> Response:
        """The reservations (issue 33), as `rcontrol show reservation --json` lists them."""
        if (refused := self.gate.read_refusal(request)) is not None:
            return refused
        reply = self.reservations_book.handle(m.ReservationRequest(action="show"))
        return Json(self._meta_doc("reservations", list(reply.reservations), request),
                    headers={"Cache-Control": "no-cache"})

    # -- the page --------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        html = self.page.render(cluster=self.nodes_view.config.cluster_name,
                                auth=self.gate.auth, poll_seconds=POLL_SECONDS)
        return HTMLResponse(html, headers={"Cache-Control": "no-cache", **PAGE_HEADERS})

    async def grid_feed(self, request: Request) -> Response:
        if (refused := self.gate.read_refusal(request, "nodes")) is not None:
            return refused
        async with self._feed_lock:  # pages asking at once share one build
            version = self._feed_version()
            if version != self.feed.version:
                cfg, nodes = self.nodes_view.config, self.nodes_view.nodes
                for _ in self.feed.steps(version, nodes, [p.name for p in cfg.partitions],
                                         cfg.cluster_name, self.nodes_view.wall()):
                    await trio.sleep(0)  # let heartbeats in between chunks
        etag = self.feed.etag
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers={"ETag": etag})
        headers = {"ETag": etag, "Cache-Control": "no-cache", "Vary": "Accept-Encoding"}
        gzipped = "gzip" in request.headers.get("accept-encoding", "")
        if gzipped:
            headers["Content-Encoding"] = "gzip"
        return Json(self.feed.body(gzipped), headers=headers)

    def _feed_version(self) -> tuple[int, int, float]:
        """The feed's key: a state change shows at once; heartbeat figures (load, memory,
        GPUs) may lag by FEED_STALENESS, as the metrics snapshot's did."""
        gen, soft = self.nodes_view.generation()
        now = trio.current_time()
        v = self.feed.version
        if v is not None and v[0] == gen and (v[1] == soft or now - v[2] < FEED_STALENESS):
            return v
        return gen, soft, now

    # -- writes ----------------------------------------------------------------------------

    async def set_state(self, request: Request) -> Response:
        user, refused = self.gate.who(request)
        if refused is not None:
            return refused
        expr = request.path_params["nodes"]
        why = permissions.http_write_refusal(self.nodes_view.config, user or "",
                                             f"update NodeName={expr}")
        if why is not None:  # a token gets its user's rights (ctld/rpc/permissions.py)
            logs.event("http update refused", logging.WARNING, peer=peer(request), user=user,
                       nodes=expr, error=why)
            return _error(403, why)
        try:
            body = orjson.loads(await read_body(request))
        except BodyTooLarge as exc:
            return _error(413, str(exc), headers={"connection": "close"})
        except orjson.JSONDecodeError as exc:
            return _error(400, f"request body is not JSON: {exc}")
        if not isinstance(body, dict):
            return _error(400, 'request body must be a JSON object {"state": ..., "reason": ...}')
        for key in body:
            if key not in _WRITE_KEYS:
                return _error(400, f"unknown field {key!r} (fields: state, reason)", key)
        state, reason = body.get("state"), body.get("reason")
        if not isinstance(state, str) or not state.strip():
            return _error(400, "state is required: a node state such as DRAIN or RESUME",
                          "state")
        if reason is not None and not isinstance(reason, str):
            return _error(400, "reason must be a string", "reason")
        # Checked here too only to name the field; update_nodes decides the same way.
        try:
            request_word = events.parse_admin_state(state)
        except ValueError as exc:
            return _error(400, str(exc), "state")
        if reason_required(request_word) and not (reason or "").strip():
            return _error(400, REASON_REQUIRED_MESSAGE, "reason")
        result = self.admin.update_nodes(
            m.UpdateNodes(node_names=expr, state=state, reason=reason, user=user or ""))
        doc = {"changed": list(result.changed),
               "errors": [{"error": e} for e in result.errors], "user": user}
        if result.changed and (why := await self.not_on_disk()) is not None:
            return _error(500, why, "state")
        if result.ok:
            return Json(doc)
        logs.event("http update refused", logging.WARNING, peer=peer(request), user=user,
                   nodes=expr, error="; ".join(result.errors[:3]))
        unknown = any(e.startswith("unknown node") for e in result.errors)
        return Json(doc, status_code=404 if unknown and not result.changed else 400)

    def routes(self) -> list:
        import importlib.resources

        static = importlib.resources.files("ranch.ctld.web") / "static"
        return [
            Route("/", self.index),
            Route("/api/v1/nodes", self.nodes),
            Route("/api/v1/nodes/{name}", self.node),
            Route("/api/v1/nodes/{nodes}/state", self.set_state, methods=["POST"]),
            Route("/api/v1/partitions", self.partitions),
            Route("/api/v1/sinfo", self.sinfo),
            *self.job_routes.routes(),  # /api/v1/jobs[/{id}], the header's /ui/jobs.json
            Route("/api/v1/reservations", self.reservations),
            Route("/metrics", self.metrics),
            Route("/ui/grid.json", self.grid_feed),
            *self._page_routes(),  # the page's panes, admin actions, stream and views
            Mount("/static", StaticFiles(directory=str(static)), name="static"),
            *self._restd().routes(),  # slurmrestd's own paths (ctld/web/restd.py)
        ]

    def _page_routes(self) -> list:
        gate, nodes, jobs = self.gate, self.nodes_view, self.jobs_view
        panes = Panes(nodes, jobs, self.events, gate.read_refusal, gate.reader)
        live = Live(nodes, jobs, self.events, lambda r: gate.read_refusal(r, "nodes"),
                    panes.events_refusal)
        return [
            *panes.routes(),  # the History tab and the event timeline
            *Usage(nodes, jobs.store, jobs.usage, gate.read_refusal, gate.reader).routes(),
            *Admin(nodes, self.admin, gate.who, self.not_on_disk).routes(),  # reboot, resv.
            *live.routes(),  # the page's change stream
            # the node panel and the job views
            *Pages(nodes, jobs, self.site, gate.read_refusal, gate.reader, gate.who,
                   self.job_routes.job_records, self.not_on_disk).routes(),
        ]

    def _restd(self) -> Restd:
        return Restd(self.nodes_view, self.reservations_book, self.jobs_view.cancel,
                     auth=self.gate.auth, who=self.gate.who,
                     job_records=self.job_routes.job_records, submit=self.submit,
                     not_on_disk=self.not_on_disk,
                     sched_stats=self.jobs_view.sched_stats)


def build_app(nodes: WebNodes, jobs: WebJobs, events: WebEvents, admin: WebAdmin,
              reservations: ReservationBook, health: Health, site: Site, settings: Any,
              durability: WebDurability | None = None) -> Starlette:
    web = Web(nodes, jobs, events, admin, reservations, health, site, settings, durability)
    app = Starlette(routes=web.routes())
    app.state.web = web
    return app



