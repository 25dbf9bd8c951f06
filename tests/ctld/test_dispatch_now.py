"""A request answered in the idle poller's own task (ctld/rpc/dispatch.py `answer_now`): its
route's reply at once, a route that has come to wait refused in words rather than left pending,
and every refusal logged with its peer, no other reply."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import pytest

from ranch.ctld import logs
from ranch.ctld.rpc.dispatch import Dispatcher, log_refusal
from ranch.ctld.rpc.routes import Route
from ranch.protocol import messages as m
from tests.ctld.helpers import make_config


class Counts:
    def __init__(self) -> None:
        self.nodes = self.jobs = 0

    def counts(self) -> tuple[int, int]:
        return self.nodes, self.jobs


class Conn:
    peer, node, who = "10.0.0.9:6818", "n1", None


def dispatcher(handler: Any, counts: Counts | None = None, changes: bool = True) -> Dispatcher:
    config = make_config()
    return Dispatcher({m.Ack: Route(handler, changes)}, config=lambda: config,
                      changes=counts or Counts())


def test_a_route_that_answers_at_once_gives_its_reply_and_whether_it_confirms() -> None:
    counts = Counts()

    def handler(conn: Any, msg: Any) -> Any:
        counts.nodes += 1  # it changed a node: its reply waits for the journal
        return m.Pong("c", "1", 0.0)

    assert dispatcher(handler, counts).answer_now(Conn(), m.Ack()) == (m.Pong("c", "1", 0.0),
                                                                       True)
    assert dispatcher(handler, changes=False).answer_now(Conn(), m.Ack())[1] is False
    assert dispatcher(lambda c, msg: None).answer_now(Conn(), m.Ack())[0] is None


def test_a_route_that_waits_is_refused_and_its_coroutine_closed() -> None:
    ran = []

    async def handler(conn: Any, msg: Any) -> Any:
        ran.append(msg)
        return m.Pong("c", "1", 0.0)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would be raised
        reply, confirms = dispatcher(handler).answer_now(Conn(), m.Ack())
    assert isinstance(reply, m.Error) and reply.code == "internal"
    assert "not to be answered at once" in reply.message and not confirms and ran == []


@pytest.mark.parametrize(("reply", "logged"), [
    (m.Error("unknown_node", "register first"), "unknown_node: register first"),
    (m.JobResult(ok=False, errors=("no such job 7",)), "no such job 7"),
    (m.RegisterReply(accepted=False, reason="bad credential"), "bad credential"),
    (m.RegisterReply(accepted=False, reason="", health_check_first=True), None),
    (m.JobResult(ok=True), None),
    (m.HeartbeatReply(node_state="IDLE"), None),
])
def test_a_refusal_is_logged_with_its_peer_and_nothing_else_is(
        caplog: pytest.LogCaptureFixture, reply: Any, logged: str | None) -> None:
    with caplog.at_level(logging.WARNING, logger=logs.LOGGER_NAME):
        log_refusal(Conn(), "Heartbeat", reply)
    lines = [r.getMessage() for r in caplog.records]
    if logged is None:
        assert lines == []
    else:
        assert len(lines) == 1 and logged in lines[0] and "10.0.0.9:6818" in lines[0]
