"""The page's History tab and event timeline: racct's query (GetAcct through Jobs.acct_query, cut
by PrivateData as ctld/rpc/permissions.py cuts racct's) and `rcontrol events`' log (EventLog.query,
refused to a non-admin under PrivateData=nodes|events as the RPC is), each record given the
timeline's category (drain, resume, reboot, health, guard, controller, ...)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ranch.conf import hostlist
from ranch.ctld.rights import ADMINS, denied
from ranch.ctld.web.responses import Json, error, is_number
from ranch.protocol import messages as m
from ranch.statemachine.finalstates import FINAL_STATES

if TYPE_CHECKING:
    from collections.abc import Callable

    from ranch.ctld.rights import Identity
    from ranch.ctld.web.webports import Configured, WebEvents, WebJobs

HISTORY_LIMIT = 2000  # rows the tab shows at once (left_out says how many more matched)
HISTORY_KEYS = ("job_id", "array_job_id", "array_task_id", "name", "user", "account",
                "partition", "state", "exit_code", "signal", "submit_time", "start_time",
                "end_time", "nodes", "node_count", "cpus", "restarts", "reason")
EVENTS_LIMIT = 500  # the newest events the timeline shows
CATEGORIES = ("drain", "resume", "reboot", "health", "down", "guard", "controller",
              "reservation", "membership", "state", "jobs")
_MEMBERSHIP = frozenset({"registered", "joined", "left", "approved", "refused", "deleted",
                         "credential_issued", "credential_revoked"})


def category(rec: dict[str, Any]) -> str:
    """The timeline's kind of an event record (docs/internals.md "Event records")."""
    kind = rec.get("kind", "")
    if kind.startswith("guard_"):
        return "guard"
    if kind.startswith("controller_") or "takeover" in kind:
        return "controller"
    if kind == "reservation":
        return "reservation"
    if kind in _MEMBERSHIP:
        return "membership"
    if kind in ("start", "reserve"):  # a scheduling decision (ctld/jobs/decisions.py)
        return "jobs"
    if kind != "state":
        return "state"
    cause, old, new = rec.get("cause", ""), rec.get("old", ""), rec.get("new", "")
    if cause in ("allocation", "completing"):
        return "jobs"
    if cause == "reboot" or ("REBOOT" in new and "REBOOT" not in old):
        return "reboot"
    if cause == "healthcheck" and new != old:
        return "health"
    if "DRAIN" in new and "DRAIN" not in old:
        return "drain"
    if any(w in old for w in ("DRAIN", "DOWN", "FAIL")) and not any(
            w in new for w in ("DRAIN", "DOWN", "FAIL")):
        return "resume"
    if new.startswith(("DOWN", "FAIL")) and not old.startswith(("DOWN", "FAIL")):
        return "down"
    return "state"


def _float(text: str | None, field: str) -> float | None:
    if text is None or not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{field} must be epoch seconds, not {text!r}") from None


def _words(text: str | None) -> list[str]:
    return [w.strip() for w in (text or "").split(",") if w.strip()]


class Panes:
    """GET /ui/history and /ui/events; the auth checks are ctld/web/app.py Web's."""

    def __init__(self, configured: Configured, jobs: WebJobs, events: WebEvents,
                 read_refusal: Callable[..., Response | None],
                 reader: Callable[[Request], Identity | None]) -> None:
        self.configured, self.jobs, self.log = configured, jobs, events
        self._read_refusal, self._reader = read_refusal, reader

    async def history(self, request: Request) -> Response:
        """Finished jobs: racct -s <final states> -S START -E END [-u USERS] [-A ACCOUNTS]."""
        if (refused := self._read_refusal(request)) is not None:
            return refused
        q = request.query_params
        try:
            start, end = _float(q.get("start"), "start"), _float(q.get("end"), "end")
        except ValueError as exc:
            return error(400, str(exc), "start")
        states = tuple(s.upper() for s in _words(q.get("state"))) or tuple(sorted(FINAL_STATES))
        bad = [s for s in states if s not in FINAL_STATES]
        if bad:
            return error(400, f"not a final state: {', '.join(bad)} (the history holds "
                         f"{', '.join(sorted(FINAL_STATES))})", "state")
        users, accounts = _words(q.get("user")), {a.lower() for a in _words(q.get("account"))}
        reader = self._reader(request)
        private = set(self.configured.config.access.private_data)
        hidden = None
        msg = m.GetAcct(users=tuple(users), states=states, start=start, end=end)
        if {"jobs", "usage"} & private and not (reader and reader.admin):
            # racct under PrivateData=jobs|usage: a user's query covers their own jobs only
            # (ctld/rpc/permissions.py gate); a reader without a token has none
            if reader is None:
                return Json({"jobs": [], "left_out": 0, "hidden": (
                    "PrivateData hides the history from a reader without a token: sign in"),
                    "now": time.time()}, headers={"Cache-Control": "no-cache"})
            msg = m.GetAcct(uids=(reader.uid,), states=states, start=start, end=end)
            hidden = f"PrivateData shows {reader.name} their own jobs only"
        body = orjson.loads(await self.jobs.acct_query(msg))
        rows = body["jobs"]
        if users:  # also when the query was cut to the reader's own: their name must be named
            rows = [r for r in rows if r.get("user") in users or str(r.get("uid")) in users]
        if accounts:  # racct -A: the command's own filter (ranch/cli/racct.py narrow)
            rows = [r for r in rows if (r.get("account") or "").lower() in accounts]
        rows.sort(key=lambda r: (r.get("end_time") or 0, r["job_id"]), reverse=True)
        word = q.get("limit") or str(HISTORY_LIMIT)
        limit = min(int(word), HISTORY_LIMIT) if is_number(word) else HISTORY_LIMIT
        return Json({
            "jobs": [{k: r.get(k) for k in HISTORY_KEYS} for r in rows[:limit]],
            "left_out": max(0, len(rows) - limit) + int(body.get("left_out") or 0),
            "history_error": body.get("history_error") or "",
            "users": sorted({r.get("user") or "" for r in rows}),
            "accounts": sorted({r.get("account") or "" for r in rows}),
            "hidden": hidden, "now": body.get("generated_at") or time.time(),
        }, headers={"Cache-Control": "no-cache"})

    def events_refusal(self, request: Request) -> Response | None:
        """`rcontrol events`' rule: PrivateData=nodes or =events shows the log to admins only."""
        if (refused := self._read_refusal(request)) is not None:
            return refused
        private = self.configured.config.access.private_data
        word = "nodes" if "nodes" in private else "events" if "events" in private else None
        reader = self._reader(request)
        if word is None or (reader is not None and reader.admin):
            return None
        return error(403, denied("the event log", f"PrivateData={word} shows it to admins "
                                 f"({ADMINS}) only"))

    async def events(self, request: Request) -> Response:
        """The event log, newest first: ?node=HOSTLIST&kind=drain,reboot&since=EPOCH."""
        if (refused := self.events_refusal(request)) is not None:
            return refused
        q = request.query_params
        nodes = None
        expr = (q.get("node") or "").strip()
        if expr:
            try:
                nodes = hostlist.expand(expr)
            except ValueError as exc:
                return error(400, f"bad node name or hostlist {expr!r}: {exc}", "node")
        kinds = set(_words(q.get("kind")))
        unknown = kinds - set(CATEGORIES)
        if unknown:
            return error(400, f"unknown kind {', '.join(sorted(unknown))}; kinds: "
                         f"{', '.join(CATEGORIES)}", "kind")
        try:
            since = _float(q.get("since"), "since") or 0.0
        except ValueError as exc:
            return error(400, str(exc), "since")
        log = self.log
        out = []
        for rec in reversed(log.query(since, nodes)):
            cat = category(rec)
            if not kinds or cat in kinds:
                out.append({**rec, "category": cat})
                if len(out) >= EVENTS_LIMIT:
                    break
        return Json({"events": out, "seq": log.seq, "kinds": list(CATEGORIES)},
                    headers={"Cache-Control": "no-cache"})

    async def me(self, request: Request) -> Response:
        """Who the page's token names and whether that user is an admin: which admin controls
        (reservations) the page offers; every press is checked again by its route."""
        reader = self._reader(request)
        return Json({"name": None if reader is None else reader.name,
                     "admin": bool(reader and reader.admin),
                     "events": self.events_refusal(request) is None},
                    headers={"Cache-Control": "no-cache"})

    def routes(self) -> list[Route]:
        return [Route("/ui/history", self.history), Route("/ui/events", self.events),
                Route("/ui/me", self.me)]
