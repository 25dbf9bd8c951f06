"""GET /ui/stream: Server-Sent Events that tell an open page what changed, so it patches the nodes
an event names instead of refetching the grid.

Fed by the event log's followers (ctld/nodes/eventlog.py: the core only appends to a bounded
queue per follower, so a slow page delays nothing). Each frame carries, per node an event named,
its row as the grid feed has it (ctld/web/grid.py), built once per batch from the node's current
record, and `id:` the log's sequence number. A page that fell behind (its queue overflowed) gets
`resync` and refetches the grid once. The page reads it with fetch (EventSource cannot send the
bearer token), and the reader's rights are checked as the grid's and the timeline's are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
import trio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ranch.ctld.nodes.eventlog import Follower
from ranch.ctld.nodes.node import snapshot_record
from ranch.ctld.web.grid import health_note
from ranch.ctld.web.panes import category
from ranch.ctld.web.responses import error
from ranch.protocol.records import reason_user

if TYPE_CHECKING:
    from collections.abc import Callable

    from ranch.ctld.web.webports import WebEvents, WebJobs, WebNodes

MAX_STREAMS = 64  # open pages at once; each holds a connection, a task and a bounded queue
KEEPALIVE = 15.0  # seconds between comments on a quiet stream (proxies close idle ones)
JOBS_CHECK = 2.0  # seconds between looks at Jobs.gen on a quiet stream (the header's counts)
COALESCE = 0.2  # seconds a batch waits for more: a burst of changes is one frame
STREAM_SECONDS = 600.0  # a stream ends after this; the page reconnects (Last-Event-ID)


def node_row(node: Any) -> dict[str, Any]:
    """A node as the grid feed holds it: sinfo's long state, reason (text, user, time, source),
    CPUs allocated and total, health note."""
    rec = snapshot_record(node)
    r = rec["state"].get("reason")
    reason = ([r["text"], reason_user(r), int(r.get("time") or 0), r.get("source")]
              if r and r.get("text") else None)
    return {"long": rec["long"], "reason": reason, "cpus": [rec["cpus_alloc"], rec["cpus"]],
            "health": health_note(rec)}


class SseResponse(Response):
    """A stream of frames that unsubscribes its follower however it ends: the client going
    (http.disconnect), the stream's age, or the server's shutdown."""

    def __init__(self, frames: Callable[[Callable[[bytes], Any]], Any],
                 on_close: Callable[[], None]) -> None:
        super().__init__(status_code=200, media_type="text/event-stream", headers={
            "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.frames, self.on_close = frames, on_close
        # a stream has no length: starlette wrote Content-Length: 0 for the empty body
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})

            async def write(data: bytes) -> None:
                await send({"type": "http.response.body", "body": data, "more_body": True})

            async with trio.open_nursery() as nursery:
                async def gone() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    nursery.cancel_scope.cancel()

                nursery.start_soon(gone)
                with trio.move_on_after(STREAM_SECONDS):
                    await self.frames(write)
                nursery.cancel_scope.cancel()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went while a frame was sent
        finally:
            self.on_close()


def frame(event: str, data: Any, ident: int | None = None) -> bytes:
    head = f"id: {ident}\n" if ident is not None else ""
    return f"{head}event: {event}\n".encode() + b"data: " + orjson.dumps(data) + b"\n\n"


class Hub(Follower):
    """The one follower every open page shares in the event log: it hands each event to the
    pages' own bounded queues, so pages never take the seats `rcontrol events --follow` is
    capped to (ctld/rpc/eventstream.py MAX_FOLLOWERS counts the log's followers)."""

    __slots__ = ("streams",)

    def __init__(self) -> None:
        super().__init__(None)
        self.streams: set[Follower] = set()

    def offer(self, rec: dict[str, Any]) -> None:
        for follower in self.streams:
            follower.offer(rec)

    def join(self, follower: Follower) -> bool:
        """Add a page's queue; True when it is the first (the hub joins the log then)."""
        self.streams.add(follower)
        return len(self.streams) == 1

    def leave(self, follower: Follower) -> bool:
        """Drop a page's queue; True when none is left (the hub leaves the log then)."""
        self.streams.discard(follower)
        return not self.streams


class Live:
    """The stream route; `nodes_refusal` is the grid's check, `events_refusal` the timeline's."""

    def __init__(self, nodes: WebNodes, jobs: WebJobs, events: WebEvents,
                 nodes_refusal: Callable[[Request], Response | None],
                 events_refusal: Callable[[Request], Response | None]) -> None:
        self.nodes, self.jobs, self.events = nodes, jobs, events
        self._nodes_refusal, self._events_refusal = nodes_refusal, events_refusal
        self.hub = Hub()
        self.frames_sent = 0
        # The frames last built, by what they hold: the open pages take the same batches at the
        # same moment, so one page builds a frame and the others send the same bytes.
        self._built: dict[tuple[int, int, int, int, bool], bytes] = {}

    @property
    def open(self) -> int:
        return len(self.hub.streams)

    async def stream(self, request: Request) -> Response:
        if (refused := self._nodes_refusal(request)) is not None:
            return refused
        if self.open >= MAX_STREAMS:
            return error(503, f"{MAX_STREAMS} pages follow the stream already; the page "
                         "polls instead", headers={"Retry-After": "30"})
        with_events = self._events_refusal(request) is None
        log = self.events
        follower = Follower()  # this page's own bounded queue, fed through the hub
        if self.hub.join(follower):
            log.follow(self.hub)
        first = log.seq

        def close() -> None:
            if self.hub.leave(follower):
                log.unsubscribe(self.hub)

        async def frames(write: Callable[[bytes], Any]) -> None:
            await write(b"retry: 3000\n" + frame("hello", {"seq": first, "events": with_events},
                                                 first))
            jobs = self.jobs.store
            seen_gen, quiet = jobs.gen, 0.0
            while True:
                got = None
                with trio.move_on_after(JOBS_CHECK):  # only the wait: a batch taken is sent
                    got = await follower.next_batch()
                if got is not None:
                    batch, missed = got
                    await trio.sleep(COALESCE)
                    more, late = await _drain(follower)
                    batch, missed = batch + more, missed + late
                    seen_gen, quiet = jobs.gen, 0.0
                    await write(self._frame(batch, missed, with_events))
                    self.frames_sent += 1
                    continue
                # No event: a job submitted or ended without a node changing state still
                # changes the header's counts (Jobs.gen says so: one integer looked at)
                quiet += JOBS_CHECK
                if jobs.gen != seen_gen:
                    seen_gen, quiet = jobs.gen, 0.0
                    await write(frame("change", {"seq": self.events.seq, "nodes": {},
                                                 "jobs": True, "reservations": False}))
                elif quiet >= KEEPALIVE:
                    quiet = 0.0
                    await write(b": keep-alive\n\n")

        return SseResponse(frames, close)

    def _frame(self, batch: list[dict[str, Any]], missed: int, with_events: bool) -> bytes:
        key = (batch[0]["seq"] if batch else -1, batch[-1]["seq"] if batch else self.events.seq,
               len(batch), missed, with_events)
        if (got := self._built.get(key)) is None:
            if len(self._built) >= 2 * MAX_STREAMS:
                self._built.clear()
            got = self._built[key] = self._build_frame(batch, missed, with_events)
        return got

    def _build_frame(self, batch: list[dict[str, Any]], missed: int, with_events: bool) -> bytes:
        seq = batch[-1]["seq"] if batch else self.events.seq
        if missed:  # the page fell behind: one refetch of the grid is cheaper than guessing
            return frame("resync", {"seq": seq, "missed": missed}, seq)
        names = dict.fromkeys(r["node"] for r in batch if r.get("node") not in (None, "-"))
        nodes = self.nodes.nodes
        rows = {n: node_row(nodes[n]) for n in names if n in nodes}
        cats = [category(r) for r in batch]
        doc: dict[str, Any] = {
            "seq": seq, "nodes": rows,
            "jobs": any(c in ("jobs", "state") for c in cats),
            "reservations": any(r.get("kind") == "reservation" for r in batch),
        }
        if with_events:  # the timeline's new lines (kept events only, as rcontrol events has)
            doc["events"] = [{**r, "category": c} for r, c in zip(batch, cats, strict=True)
                             if c not in ("jobs",)]
        return frame("change", doc, seq)

    def routes(self) -> list[Route]:
        return [Route("/ui/stream", self.stream)]


async def _drain(follower: Follower) -> tuple[list[dict[str, Any]], int]:
    """What else is queued now, without waiting."""
    if not follower.queue and not follower.missed:
        return [], 0
    return await follower.next_batch()

