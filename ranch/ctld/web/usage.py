"""The page's Usage tab (issue 45): the association tree with rshare's records (`rshare -a
--json`), each association's usage over time (the accounting owner's ring of samples, one per
PriorityCalcPeriod), and the pending jobs a QOS or association limit holds, by QOS and account.
PrivateData=usage cuts the first two as rctld cuts rshare's rows; PrivateData=jobs the third as
it cuts the job listings."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ranch.ctld.web.responses import Json
from ranch.statemachine.jobstates import PENDING

if TYPE_CHECKING:
    from ranch.ctld.rights import Identity
    from ranch.ctld.web.webports import Configured, JobsRead, WebUsage

# reasons a limit gives a pending job (slurm_protocol_defs.c job_reason_string): the QOS's and
# the associations' (QOSGrpCpuLimit, AssocMaxJobsLimit, ...) and a QOS's per-account and
# per-user ones (MaxJobsPerAccount, MaxCpuPerAccount...); QOSNotAllowed and the like refuse
# at submission instead
NOT_LIMITS = ("NotAllowed",)
SERIES_LIMIT = 50  # associations drawn over time: those with the most usage now


def is_limit(reason: str) -> bool:
    if reason.endswith(NOT_LIMITS):
        return False
    return reason.startswith(("QOS", "Assoc")) or (
        reason.startswith("Max") and reason.endswith(("PerAccount", "PerUser")))


def records(lines: Iterable[Any]) -> list[dict[str, Any]]:
    """`rshare -a --json`'s records: each line's fields, `depth` the account rows shown above
    it (a user's own rows alone, as PrivateData=usage leaves them, sit at 0: share_rows.py)."""
    out = []
    above: list[int] = []
    for line in lines:
        rec = attrs.asdict(line)
        while above and above[-1] >= rec["depth"]:
            above.pop()
        out.append({**rec, "depth": len(above)})
        if not rec["user"]:
            above.append(line.depth)
    return out


class Usage:
    """GET /ui/usage; the auth checks are ctld/web/app.py Web's."""

    def __init__(self, configured: Configured, jobs: JobsRead, usage: WebUsage | None,
                 read_refusal: Callable[..., Response | None],
                 reader: Callable[[Request], Identity | None]) -> None:
        self.configured, self.jobs, self.usage = configured, jobs, usage
        self._read_refusal, self._reader = read_refusal, reader

    async def view(self, request: Request) -> Response:
        if (refused := self._read_refusal(request)) is not None:
            return refused
        reader = self._reader(request)
        private = set(self.configured.config.access.private_data)
        admin = reader is not None and reader.admin
        doc: dict[str, Any] = {"enabled": False, "cluster": "", "shares": [], "history": {
            "times": [], "series": []}, "hidden": None, "now": time.time()}
        if self.usage is not None:
            if "usage" in private and not admin and reader is None:
                doc["hidden"] = "PrivateData=usage hides usage from a reader without a token"
            else:
                viewer = reader.name if "usage" in private and not admin and reader else ""
                self._shares(doc, viewer)
        cut = not admin and bool({"jobs", "usage"} & private)
        # PrivateData: a user's own jobs only; a reader without a token has none
        doc["limits"] = [] if cut and reader is None else self._limits(reader if cut else None)
        return Json(doc, headers={"Cache-Control": "no-cache"})

    def _shares(self, doc: dict[str, Any], viewer: str) -> None:
        assert self.usage is not None
        reply = self.usage.shares(viewer)
        every = not viewer or self.usage.sees_all(viewer)
        if viewer and not every:
            doc["hidden"] = f"PrivateData=usage shows {viewer} their own associations only"
        doc.update(enabled=reply.enabled, cluster=reply.cluster, shares=records(reply.lines))
        samples = list(self.usage.samples())
        if not samples:
            return
        last = {(a, u): v for a, u, v in samples[-1][1] if every or u == viewer}
        chosen = sorted(last, key=lambda k: (-last[k], k))[:SERIES_LIMIT]
        index = {k: i for i, k in enumerate(chosen)}
        values: list[list[float | None]] = [[None] * len(samples) for _ in chosen]
        for t, (_, row) in enumerate(samples):
            for account, user, value in row:
                i = index.get((account, user))
                if i is not None:
                    values[i][t] = value
        doc["history"] = {"times": [s[0] for s in samples], "series": [
            {"account": a, "user": u, "values": values[index[(a, u)]]} for a, u in chosen]}

    def _limits(self, only: Identity | None) -> list[dict[str, Any]]:
        """Pending jobs held by a limit, by (QOS, account, reason): how many and whose; `only`:
        the reader whose own jobs alone count (PrivateData), else every job."""
        groups: dict[tuple[str, str, str], dict[str, Any]] = {}
        for job in self.jobs.jobs.values():
            if job.state != PENDING or not is_limit(job.reason):
                continue
            req = job.req
            if only is not None and req.uid != only.uid:
                continue
            key = (req.qos, req.account, job.reason)
            g = groups.setdefault(key, {"qos": key[0], "account": key[1], "reason": key[2],
                                        "jobs": 0, "users": set(), "job_ids": []})
            g["jobs"] += 1
            g["users"].add(req.user)
            if len(g["job_ids"]) < 20:
                g["job_ids"].append(job.id)
        out = [{**g, "users": sorted(g["users"])} for g in groups.values()]
        out.sort(key=lambda g: (-g["jobs"], g["qos"], g["account"], g["reason"]))
        return out

    def routes(self) -> list[Route]:
        return [Route("/ui/usage", self.view)]
