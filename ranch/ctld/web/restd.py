"""slurmrestd's own paths (openapi/v0.0.38, as Debian's slurmrestd 22.05 serves them) beside
/api/v1, so that clients written for slurmrestd find Ranch.

Reads are the ones the CLI gets (the snapshot, the job list, the reservations) with the same
rights (PrivateData, owners, admins); a submit or a cancel is the SubmitJob or CancelJobs that
rbatch or rcancel sends, handed to the job store's same handlers with the same checks, for the
user the request proved (restd_auth.py). Answers and errors are in slurmrestd's shapes.
"""

from __future__ import annotations

import logging
import signal as signals
import socket
from typing import TYPE_CHECKING, Any

import orjson
import trio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ranch.ctld import logs
from ranch.ctld.rights import Identity
from ranch.ctld.rpc import permissions
from ranch.ctld.web import restd_docs as docs
from ranch.ctld.web.limits import BodyTooLarge, read_body
from ranch.ctld.web.responses import is_number
from ranch.ctld.web.restd_auth import AuthFailure, JwtKey, jwt_key_path, may_act_as
from ranch.ctld.web.restd_submit import ESLURM_REST_FAIL_PARSING, SubmitRefused
from ranch.ctld.web.restd_submit import job as submission
from ranch.ctld.web.tokens import bearer, is_loopback
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ranch.ctld.web.webports import ReservationBook, WebNodes

PREFIX = "/slurm/v0.0.38"
JOB_CHUNK = 2000  # job documents built between two yields to the event loop
# slurm_errno.h's numbers and words for the refusals these routes give
ACCESS_DENIED = (2002, "Access/permission denied")
INVALID_JOB_ID = (2017, "Invalid job id specified")
INVALID_NODE = (2018, "Invalid node name specified")
INVALID_PARTITION = (2000, "Invalid partition name specified")
INVALID_RESERVATION = (2053, "Requested reservation is invalid")
ALREADY_DONE = (2021, "Job/step already completing or completed")
AUTH_FAILURE = (1007, "Protocol authentication error")
UNSPECIFIED = (-1, "Unspecified error")
_NOBODY = object()  # an anonymous reader, as HttpAuth lets one read /api/v1


class Json(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def failure(status: int, errors: list[dict[str, Any]], **fields: Any) -> Json:
    """slurmrestd's answer with errors: {"meta", "errors": [...], <the listing's key>: []}."""
    return Json({"meta": docs.meta(), "errors": errors, **fields}, status_code=status)


def error(number_words: tuple[int, str], description: str, source: str) -> dict[str, Any]:
    number, words = number_words
    return {"description": description, "error_number": number, "error": words,
            "source": source}


class Restd:
    """The /slurm/v0.0.38 routes. Besides the nodes' view, the reservations and the job store's
    cancel, it is given the web layer's own checks and paths (ctld/web/app.py Web's, passed in:
    this module must not import the one that mounts it): HttpAuth's word, the bearer token's
    check, the job records, rbatch's submission and the wait for the journal."""

    def __init__(self, nodes: WebNodes, reservations: ReservationBook,
                 cancel: Callable[[m.CancelJobs, Identity | None], m.JobResult], *, auth: str,
                 who: Callable[[Request], tuple[str | None, Response | None]],
                 job_records: Callable[[tuple[int, ...]], tuple[float, list[dict]]],
                 submit: Callable[[m.SubmitJob], Awaitable[m.SubmitReply | m.Error]],
                 not_on_disk: Callable[[], Awaitable[str | None]],
                 sched_stats: Callable[[], dict[str, Any]]) -> None:
        self.nodes_view, self.book, self.cancel_jobs = nodes, reservations, cancel
        self.auth, self._who, self._job_records = auth, who, job_records
        self._submit, self._not_on_disk = submit, not_on_disk
        self._sched_stats = sched_stats  # the schedulers' counters (ctld/jobs/schedstats.py)
        self.jwt = JwtKey(jwt_key_path(nodes.config))

    # -- who asks --------------------------------------------------------------------------

    def _caller(self, request: Request) -> Identity | object | Response:
        """The proven user, _NOBODY (an anonymous reader HttpAuth lets in), or the refusal."""
        config = self.nodes_view.config
        token = request.headers.get("x-slurm-user-token")
        asked = request.headers.get("x-slurm-user-name")
        try:
            if token is not None:
                if not asked:
                    raise AuthFailure("X-SLURM-USER-TOKEN needs X-SLURM-USER-NAME")
                path = jwt_key_path(config)  # read anew: rcontrol reconfigure may change it
                if path != self.jwt.path:
                    self.jwt = JwtKey(path)
                user = self.jwt.verify(token)
                sun = user.get("sun") or user["username"]
                if not may_act_as(config, sun, asked):
                    raise AuthFailure(f"the token of {sun} may not act as {asked}")
                return permissions.identify_name(config, asked)
            if bearer(request.headers.get("authorization")) is not None:
                name, refused = self._who(request)
                if refused is not None or name is None:
                    raise AuthFailure("the bearer token is not one of HttpTokenFile")
                return permissions.identify_name(config, name)
            auth = self.auth
            client = request.client.host if request.client else None
            if auth == "none" or (auth == "loopback" and is_loopback(client)):
                return _NOBODY
            raise AuthFailure("this request needs X-SLURM-USER-NAME and X-SLURM-USER-TOKEN "
                              "(or Authorization: Bearer TOKEN of HttpTokenFile)")
        except AuthFailure as exc:
            logs.event("http slurmrestd auth refused", logging.WARNING, path=request.url.path,
                       peer=_peer(request), user=asked or "", error=str(exc))
            return failure(401, [error(AUTH_FAILURE, f"Authentication failure: {exc}",
                                       "rest_auth")])

    def _reader(self, request: Request) -> tuple[Identity | None, Response | None]:
        who = self._caller(request)
        if isinstance(who, Response):
            return None, who
        return (who if isinstance(who, Identity) else None), None

    def _writer(self, request: Request) -> tuple[Identity | None, Response | None]:
        who = self._caller(request)
        if isinstance(who, Response):
            return None, who
        if not isinstance(who, Identity) or who.uid < 0:
            why = ("a submit or cancel needs a user: X-SLURM-USER-NAME and X-SLURM-USER-TOKEN"
                   if not isinstance(who, Identity) else f"user {who.name} has no passwd entry")
            return None, failure(401, [error(AUTH_FAILURE, f"Authentication failure: {why}",
                                             "rest_auth")])
        return who, None

    def _nodes_refusal(self, who: Identity | None, key: str, source: str) -> Response | None:
        why = permissions.http_hidden(self.nodes_view.config, who, "nodes")
        if why is None:
            return None
        return failure(500, [error(ACCESS_DENIED, why, source)], **{key: []})

    # -- reads -----------------------------------------------------------------------------

    async def ping(self, request: Request) -> Response:
        _who, refused = self._reader(request)
        if refused is not None:
            return refused
        hosts = self.nodes_view.config.control.hosts or ()
        # the controller answering is the primary (a standby of a pair does not serve HTTP)
        pings = [{"hostname": _host(h.name), "ping": "UP", "status": 0, "mode": "primary"}
                 for h in hosts[:1]]
        return Json(docs.document(pings=pings))

    async def diag(self, request: Request) -> Response:
        _who, refused = self._reader(request)
        if refused is not None:
            return refused
        now, records = self._job_records(())
        stats = docs.diag(records, now, len(self.nodes_view.snapshot().partitions))
        stats.update((k, v) for k, v in self._sched_stats().items() if k in stats)
        return Json(docs.document(statistics=stats))

    async def _jobs(self, who: Identity | None, ids: tuple[int, ...] = ()) -> list[dict]:
        _, records = self._job_records(ids)  # an array's id brings its tasks too
        records = permissions.visible_jobs(self.nodes_view.config, who, records)
        snap = self.nodes_view.snapshot()
        by_name = {n["name"]: n for n in snap.nodes}
        least = min((n["real_memory"] for n in by_name.values()), default=0)
        out = []
        for i, r in enumerate(records):
            if i and i % JOB_CHUNK == 0:
                await trio.sleep(0)  # a listing of 50,000 jobs lets heartbeats through
            out.append(docs.job(r, self.nodes_view.config.cluster_name, by_name, least))
        return out

    async def jobs(self, request: Request) -> Response:
        who, refused = self._reader(request)
        if refused is not None:
            return refused
        return Json(docs.document(jobs=await self._jobs(who)))

    async def job(self, request: Request) -> Response:
        who, refused = self._reader(request)
        if refused is not None:
            return refused
        ident = request.path_params["job_id"]
        found = await self._jobs(who, (int(ident),)) if is_number(ident) else []
        if not found:
            return failure(500, [error(INVALID_JOB_ID, f"Unable to find JobId={ident}",
                                       "slurm_load_job")], jobs=[])
        return Json(docs.document(jobs=found))

    async def nodes(self, request: Request, name: str | None = None) -> Response:
        who, refused = self._reader(request)
        if refused is not None:
            return refused
        if (hidden := self._nodes_refusal(who, "nodes", "slurm_load_node")) is not None:
            return hidden
        records = [n for n in self.nodes_view.snapshot().nodes if name in (None, n["name"])]
        if not records:
            return failure(500, [{"error": INVALID_NODE[1], "errno": INVALID_NODE[0]}],
                           nodes=[])
        return Json(docs.document(nodes=[docs.node(n) for n in records]))

    async def node(self, request: Request) -> Response:
        return await self.nodes(request, request.path_params["node_name"])

    async def partitions(self, request: Request, name: str | None = None) -> Response:
        _who, refused = self._reader(request)
        if refused is not None:
            return refused
        snap = self.nodes_view.snapshot()
        by_name = {n["name"]: n for n in snap.nodes}
        found = [docs.partition(p, by_name) for p in snap.partitions
                 if name in (None, p["name"])]
        if not found and name is not None:
            return failure(500, [{"error": INVALID_PARTITION[1],
                                  "errno": INVALID_PARTITION[0]}], partitions=[])
        return Json(docs.document(partitions=found))

    async def partition(self, request: Request) -> Response:
        return await self.partitions(request, request.path_params["partition_name"])

    async def reservations(self, request: Request, name: str | None = None) -> Response:
        _who, refused = self._reader(request)
        if refused is not None:
            return refused
        reply = self.book.handle(m.ReservationRequest(action="show"))
        by_name = {n["name"]: n for n in self.nodes_view.snapshot().nodes}
        found = [docs.reservation(r, by_name) for r in reply.reservations
                 if name in (None, r["name"])]
        if not found and name is not None:
            return failure(500, [{"error": INVALID_RESERVATION[1],
                                  "errno": INVALID_RESERVATION[0]}], reservations=[])
        return Json(docs.document(reservations=found))

    async def reservation(self, request: Request) -> Response:
        return await self.reservations(request, request.path_params["reservation_name"])

    # -- writes: rbatch's and rcancel's requests -------------------------------------------

    async def submit(self, request: Request) -> Response:
        who, refused = self._writer(request)
        if who is None:
            return refused or failure(401, [])
        try:
            body = orjson.loads(await read_body(request))
            msg = submission(body, who)
        except BodyTooLarge as exc:
            return failure(413, [{"error": str(exc), "error_code": ESLURM_REST_FAIL_PARSING}])
        except orjson.JSONDecodeError as exc:
            return failure(400, [{"error": f"Unable to parse query: {exc}",
                                  "error_code": ESLURM_REST_FAIL_PARSING}])
        except SubmitRefused as exc:
            return failure(400, [{"error": w, "error_code": n} for n, w in exc.errors])
        # the checks the RPC gate makes of rbatch's SubmitJob (ctld/rpc/permissions.py gate)
        # then rbatch's path: on disk before the reply, retracted if the write fails
        reply = (permissions.root_job_refusal(self.nodes_view.config, msg)
                 or permissions.nice_refusal(who, msg) or await self._submit(msg))
        if isinstance(reply, m.Error):
            number = ACCESS_DENIED[0] if reply.code == "permission_denied" else UNSPECIFIED[0]
            logs.event("http slurmrestd submit refused", logging.INFO, user=who.name,
                       error=reply.message)
            return failure(500, [{"error": reply.message, "error_code": number}])
        logs.event("http slurmrestd job submitted", job=reply.job_id, user=who.name)
        return Json(docs.document(job_id=reply.job_id, step_id="BATCH",
                                  job_submit_user_msg=""))

    async def cancel(self, request: Request) -> Response:
        who, refused = self._writer(request)
        if who is None:
            return refused or failure(401, [])
        ident = request.path_params["job_id"]
        word = request.query_params.get("signal", "KILL").upper().removeprefix("SIG")
        try:
            num = int(word) if is_number(word) else int(signals.Signals["SIG" + word])
        except KeyError:
            return failure(400, [error((ESLURM_REST_FAIL_PARSING, "Failure during parsing"),
                                       f"unknown signal {word}", "slurm_kill_job")])
        if not is_number(ident):
            return failure(500, [error(INVALID_JOB_ID, f"unable to kill JobId={ident} with "
                                       f"signal {num}: {INVALID_JOB_ID[1]}", "slurm_kill_job")])
        # SIGKILL, slurmrestd's default, is scancel's cancel (Ranch's signal 0: end the job)
        sig = 0 if num == signals.SIGKILL else num
        result = self.cancel_jobs(
            m.CancelJobs(job_ids=(int(ident),), user=who.name, uid=who.uid, signal=sig), who)
        text = "; ".join(result.errors)
        logs.event("http slurmrestd cancel", logging.INFO if result.ok else logging.WARNING,
                   job=ident, user=who.name, signal=num, error=text)
        # what was cancelled (all of it, or the pending tasks of a partly ended array) is on
        # disk before any answer leaves
        if result.job_ids and (why := await self._not_on_disk()) is not None:
            return failure(500, [error(UNSPECIFIED, f"JobId={ident}: {why}", "slurm_kill_job")])
        if result.ok:
            return Json(docs.document())
        kind = (ACCESS_DENIED if permissions.DENIED in text
                else ALREADY_DONE if "already" in text else INVALID_JOB_ID)
        return failure(500, [error(kind, f"unable to kill JobId={ident} with signal {num}: "
                                   f"{kind[1]}", "slurm_kill_job")])

    def routes(self) -> list[Route]:
        p = PREFIX
        return [
            Route(f"{p}/ping", self.ping), Route(f"{p}/diag", self.diag),
            Route(f"{p}/jobs", self.jobs), Route(f"{p}/job/submit", self.submit,
                                                  methods=["POST"]),
            Route(f"{p}/job/{{job_id}}", self.job, methods=["GET"]),
            Route(f"{p}/job/{{job_id}}", self.cancel, methods=["DELETE"]),
            Route(f"{p}/nodes", self.nodes), Route(f"{p}/node/{{node_name}}", self.node),
            Route(f"{p}/partitions", self.partitions),
            Route(f"{p}/partition/{{partition_name}}", self.partition),
            Route(f"{p}/reservations", self.reservations),
            Route(f"{p}/reservation/{{reservation_name}}", self.reservation),
        ]


def _host(name: str) -> str:
    """slurmctld names a SlurmctldHost of "localhost" by the machine's short host name."""
    return socket.gethostname().split(".")[0] if name == "localhost" else name


def _peer(request: Request) -> str:
    c = request.client
    return f"{c.host}:{c.port}" if c else "?"
