"""/api/v1/jobs, /api/v1/jobs/{id} and the page header's /ui/jobs.json: the records rqueue and
rcontrol show job get, through the same builders (protocol/records.py job_json, queue_doc); the
queue from the pieces ctld/web/queuecache.py keeps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
import trio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ranch import __version__
from ranch.ctld.rpc import permissions
from ranch.ctld.web import jobstats, queuecache
from ranch.ctld.web.queuecache import Piece, QueuePieces
from ranch.ctld.web.responses import Json, is_number
from ranch.ctld.web.responses import error as _error
from ranch.protocol.records import job_json, queue_doc, show_doc

if TYPE_CHECKING:
    from collections.abc import Callable

    from ranch.ctld.web.gate import Gate
    from ranch.ctld.web.webports import WebJobs, WebNodes

API_VERSION = __version__  # the release, as Slurm's JSON gives its own


class JobRoutes:
    """The job listings' routes, over the job side's ports and the page's gate."""

    def __init__(self, nodes: WebNodes, jobs: WebJobs, gate: Gate) -> None:
        self.nodes_view, self.jobs_view, self.gate = nodes, jobs, gate
        self.queue = QueuePieces(lambda: jobs.store.jobs, lambda: jobs.store.gen, jobs.encoded)
        self._lock = trio.Lock()  # one update of the pieces at a time; others wait for it
        self._job_counts: tuple[int, dict[str, int]] = (-1, {})  # (Jobs.gen, jobstats.counts)

    def routes(self) -> list:
        return [Route("/api/v1/jobs", self.jobs), Route("/api/v1/jobs/{job_id}", self.job),
                Route("/ui/jobs.json", self.job_counts), Route("/ui/queue", self.queue_delta)]

    def job_records(self, ids: tuple[int, ...] = ()) -> tuple[float, list[dict]]:
        body = orjson.loads(self.jobs_view.list_body(ids))  # the JobList body rqueue reads
        return float(body.get("generated_at") or 0.0), body["jobs"]

    def counts(self) -> dict[str, int]:
        gen = self.jobs_view.store.gen
        if self._job_counts[0] != gen:
            self._job_counts = (gen, jobstats.counts(p.counted for p in self.queue.now()))
        return self._job_counts[1]

    async def _update(self) -> list[Piece]:
        """The queue's kept pieces (ctld/web/queuecache.py) brought up to the store; pages
        asking at once share one update, and a long one lets heartbeats in between chunks."""
        async with self._lock:
            steps = self.queue.steps()
            while True:
                try:
                    next(steps)
                except StopIteration as done:
                    pieces: list[Piece] = done.value
                    return pieces
                await trio.sleep(0)

    def _visible(self, request: Request, items: list, owner: Callable[[Any], int | None]
                 ) -> list:
        return permissions.visible_jobs(self.nodes_view.config, self.gate.reader(request),
                                        items, owner=owner)

    async def _pieces(self, request: Request) -> list[Piece]:
        return self._visible(request, await self._update(), lambda p: p.owner)

    async def jobs(self, request: Request) -> Response:
        if (refused := self.gate.read_refusal(request)) is not None:
            return refused
        pieces = await self._pieces(request)
        doc = queue_doc([], self.nodes_view.wall(), version=API_VERSION, user="",
                        command=[request.method, request.url.path],
                        cluster=self.nodes_view.config.cluster_name)
        return Json(queuecache.listing(doc, pieces))

    async def queue_delta(self, request: Request) -> Response:
        """The page's Jobs tab: the whole queue as /api/v1/jobs lists it with a `mark`, then,
        asked with `since=MARK`, only the jobs listed anew since and the ids of those gone
        (`full` false); the whole again when that listing is too old or another
        controller's."""
        if (refused := self.gate.read_refusal(request)) is not None:
            return refused
        await self._update()
        delta = self.queue.delta(request.query_params.get("since", ""))
        doc = {"mark": self.queue.mark, "full": delta is None,
               "last_update": self.nodes_view.wall(), "gone": [], "jobs": []}
        if delta is None:
            shown = self._visible(request, self.queue.listed(), lambda p: p.owner)
        else:
            shown = self._visible(request, delta.pieces, lambda p: p.owner)
            doc["gone"] = [j for j, _ in self._visible(request, delta.gone, lambda g: g[1])]
        return Json(queuecache.listing(doc, shown), headers={"Cache-Control": "no-store"})

    async def job(self, request: Request) -> Response:
        if (refused := self.gate.read_refusal(request)) is not None:
            return refused
        ident = request.path_params["job_id"]
        base, sep, task = ident.partition("_")
        if not is_number(base) or (sep and not is_number(task)):
            return _error(400, f"Invalid job id specified: {ident} (a job id such as 12, or "
                          "12_3 for a task of an array)", "job_id")
        _, records = self.job_records((int(base),))
        if sep:
            records = [j for j in records if j.get("array_job_id") == int(base)
                       and j.get("array_task_id") == int(task)]
        records = permissions.visible_jobs(self.nodes_view.config, self.gate.reader(request),
                                           records)
        if not records:
            return _error(404, f"Invalid job id specified: {ident} (no such job)", "job_id")
        return Json(show_doc("jobs", [job_json(j) for j in records],
                             self.nodes_view.config.cluster_name, version=API_VERSION, user="",
                             command=[request.method, request.url.path]))

    async def job_counts(self, request: Request) -> Response:
        if (refused := self.gate.read_refusal(request)) is not None:
            return refused
        reader = self.gate.reader(request)
        if "jobs" in self.nodes_view.config.access.private_data and not (reader and reader.admin):
            # PrivateData=jobs: the header counts the reader's own jobs, as rqueue lists them
            own = await self._pieces(request)
            return Json(jobstats.counts(p.counted for p in own),
                        headers={"Cache-Control": "no-cache"})
        return Json(self.counts(), headers={"Cache-Control": "no-cache"})
