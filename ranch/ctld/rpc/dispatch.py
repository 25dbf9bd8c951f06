"""A request's way to its route: the user's rate, the permission gate, the route (a listing
maybe from the read cache), whether the reply confirms a change, and a failure turned into an
Error reply; then the refusals logged with the peer that sent them. Written once for a direct
connection's reader (ctld/rpc/reading.py) and a relay's sessions (ctld/rpc/relayhub.py).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from ranch.ctld import logs
from ranch.ctld.rpc import permissions
from ranch.ctld.rpc.ratelimit import RateLimits
from ranch.ctld.rpc.readcache import ReadCache
from ranch.ctld.state.durability import Journaled
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from ranch.conf.model import ClusterConfig
    from ranch.ctld.rpc.connection import Connection
    from ranch.ctld.rpc.routes import Route
    from ranch.ctld.rpc.rpcports import ChangeCounts


@attrs.frozen
class Held:
    """A reply held back until the journal holds what it confirms."""

    reply: Any
    request_id: int
    version: int
    request: str  # the request's type name (logs)
    confirms: bool


class Dispatcher:
    """Owns the route table (message type -> Route, ctld/rpc/routes.py), the users' rate limits
    and the read cache."""

    def __init__(self, routes: dict[type, Route], *, config: Callable[[], ClusterConfig],
                 changes: ChangeCounts) -> None:
        self._routes = dict(routes)
        self.config = config
        self.changes = changes
        self.rate_limits = RateLimits()
        self.read_cache = ReadCache(config)

    def add_route(self, kind: type, route: Route) -> None:
        """A route whose handler is built after the table (the relay hub's RelayUp)."""
        self._routes[kind] = route

    def _gate(self, conn: Connection, msg: Any) -> tuple[Route | None, Any, Any]:
        """(the route, the request as it may see it, a filter for its reply), or (None, the
        refusal, None): no route, over the user's rate, or not theirs to ask."""
        route = self._routes.get(type(msg))
        if route is None:
            return None, m.Error("bad_request",
                                 f"{type(msg).__name__} is not a request rctld serves"), None
        limited = self.rate_limits.refusal(self.config(), conn.who, type(msg).__name__)
        if limited is not None:  # a user over their rate is told to back off, and nothing done
            return None, limited, None
        msg, refused, after = permissions.gate(self.config(), conn, msg)  # who may
        if refused is not None:
            return None, refused, None
        return route, msg, after

    def _done(self, route: Route, msg: Any, after: Any, before: tuple[int, int],
              reply: Any) -> tuple[Any, bool]:
        if type(reply) is Journaled:  # the route's own change, journaled before it leaves
            return (reply if after is None else attrs.evolve(reply, reply=after(reply.reply))), True
        nodes_before, jobs_before = before
        nodes_after, jobs_after = self.changes.counts()
        confirms = route.changes and confirms_change(
            msg, nodes_after != nodes_before, jobs_after != jobs_before)
        return (reply if after is None else after(reply)), confirms

    async def dispatch(self, conn: Connection, msg: Any) -> tuple[Any, bool]:
        """(the reply of the request's route, whether it confirms a change: then it may leave
        only once the change is on disk). A route's failure is raised."""
        route, msg, after = self._gate(conn, msg)
        if route is None:
            return msg, False
        before = self.changes.counts()
        reply = self.read_cache.answer(route.handler, conn, msg)  # listings: maybe cached
        if inspect.isawaitable(reply):
            reply = await reply
        return self._done(route, msg, after, before, reply)

    def dispatch_now(self, conn: Connection, msg: Any) -> tuple[Any, bool]:
        """`dispatch` for a request whose route answers at once (IMMEDIATE): no await."""
        route, msg, after = self._gate(conn, msg)
        if route is None:
            return msg, False
        before = self.changes.counts()
        reply = self.read_cache.answer(route.handler, conn, msg)
        # a route changed (its handler is async now): IMMEDIATE or AT_ONCE must say so. A
        # coroutine is what a route waits with; isawaitable's abc check was 3 % of a beat's calls
        if inspect.iscoroutine(reply):
            reply.close()
            raise TypeError(f"the route of {type(msg).__name__} waits: it is not to be answered "
                            "at once (IMMEDIATE, readnow.AT_ONCE)")
        return self._done(route, msg, after, before, reply)

    async def answer(self, conn: Connection, msg: Any) -> tuple[Any, bool]:
        """`dispatch`, a failure answered (an Error) rather than raised."""
        try:
            return await self.dispatch(conn, msg)
        except Exception as exc:
            return failed(conn, type(msg).__name__, exc), False

    def answer_now(self, conn: Connection, msg: Any) -> tuple[Any, bool]:
        """`dispatch_now`, a failure answered (an Error) rather than raised."""
        try:
            return self.dispatch_now(conn, msg)
        except Exception as exc:
            return failed(conn, type(msg).__name__, exc), False


# The requests whose routes answer without waiting, acted on in the idle poller's own task when
# a parked node sends one (ctld/rpc/reading.py FrameReader.quick): a heartbeat (a thousand a
# second at 10,000 nodes), the Ack of a push, and JobStarted (one a job: LaunchJob's answer, or an
# older rnoded's own request after its Ack)
IMMEDIATE = frozenset({m.Heartbeat, m.Ack, m.JobStarted})


def confirms_change(msg: Any, nodes_changed: bool, jobs_changed: bool) -> bool:
    """Whether the reply to `msg` waits for the journal. A heartbeat confirms only the endings
    it carries (the node forgets them on the reply) and what it changed."""
    if type(msg) is m.Heartbeat:
        return bool(msg.jobs_ended or nodes_changed or jobs_changed)
    if type(msg) is m.Register:
        # A registration confirms only the endings it carries and the jobs it moved; its own
        # state change is journalled with the next write (a registration storm does not wait
        # on the disk: lost at a crash, the node registers again).
        return bool(msg.jobs_ended or jobs_changed)
    if type(msg) is m.JobStarted:
        # Its Ack (none to LaunchJob's answer) confirms nothing the node keeps: the node never
        # sends it again, and a launch whose JobStarted is lost keeps the controller's own
        # start time (noded/pushes.py). The node's start time is journalled with the next
        # write, so a job's run waits on one write less (docs/benchmarks.md, issue 50).
        return False
    return True


def failed(conn: Connection, request: str, exc: Exception) -> m.Error:
    """The reply to a request whose route raised `exc`, logged."""
    if isinstance(exc, OSError):  # the journal write failed: say so, never "done"
        return not_saved(request, exc)
    logging.getLogger(logs.LOGGER_NAME).exception("request failed: %s from %s", request,
                                                  conn.peer, exc_info=exc)
    return m.Error("internal", f"{request} failed: {exc!r}")


async def journal_written(sync: Callable[[], Awaitable[None]] | None,
                          waits: bool) -> OSError | None:
    """Wait for the journal's write when a held reply `waits` for it (`sync`: Durability's;
    None: nothing is persisted): None once written, the OSError when the write failed."""
    if sync is None or not waits:
        return None
    try:
        await sync()
    except OSError as exc:
        return exc
    return None


def settled(reply: Any, confirms: bool, request: str, failure: OSError | None) -> Any:
    """The reply to send once the journal write it waited for has ended (`failure`: how it
    failed): a Journaled one's own, or its `undo`; another that confirms a change an Error."""
    if type(reply) is Journaled:
        return reply.reply if failure is None else reply.undo(failure)
    if failure is not None and confirms:
        return not_saved(request, failure)
    return reply


def not_saved(request: str, exc: OSError) -> m.Error:
    logs.event("change not saved; request answered with an error", logging.ERROR,
               request=request, error=str(exc))
    return m.Error("internal", f"{request}: the change could not be written to disk "
                   f"({exc.strerror or exc}); it is in effect but a controller restart "
                   "would lose it")


_RESULTS = frozenset({m.UpdateResult, m.ReconfigureResult, m.JobResult})


def log_refusal(conn: Connection, request: str, reply: Any) -> None:
    """Every refused request is logged with the peer that sent it."""
    kind = type(reply)  # by type, not isinstance: a heartbeat's reply leaves at once
    if kind is m.Error:
        errors: tuple[str, ...] = (f"{reply.code}: {reply.message}",)
    elif kind in _RESULTS and not reply.ok:
        errors = reply.errors
    elif kind is m.RegisterReply and not reply.accepted:
        if reply.health_check_first:
            return  # the normal first step of a node with a health check, not a refusal
        errors = (reply.reason,)
    else:
        return
    shown = "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else "")
    logs.event("request refused", logging.WARNING, request=request, peer=conn.peer,
               node=conn.node or "-", error=shown)
