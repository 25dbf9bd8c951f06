"""A standby controller's port: every request is answered "not the controller; the controller
is NAME" (code `standby`), so nodes and commands move on to the next SlurmctldHost at once;
a Ping is answered, so `rcontrol ping` shows the standby UP, as scontrol shows a backup."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import trio

from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.tcp import FramedStream, PeerClosed

STANDBY = "standby"  # the Error code; protocol/versions.py notes it
REQUEST_TIMEOUT = 5.0


def not_the_controller(leader: str) -> m.Error:
    where = f"; the controller is {leader}" if leader else "; no controller holds the seat yet"
    return m.Error(STANDBY, f"not the controller{where}")


async def serve(host: str, port: int, key: bytes, leader: Callable[[], str], cluster_name: str,
                version: str, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
                ) -> None:
    started = time.time()

    async def answer(stream: trio.SocketStream) -> None:
        fs = FramedStream(stream, key)
        try:
            with trio.move_on_after(REQUEST_TIMEOUT):
                while True:
                    try:
                        frame = await fs.receive()
                    except ProtocolError as exc:
                        if exc.fatal:
                            return
                        await fs.send_error(exc)
                        continue
                    if isinstance(frame.msg, m.Ping):
                        reply: Any = m.Pong(cluster_name=cluster_name, version=version,
                                            started_at=started)
                    else:
                        reply = not_the_controller(leader())
                    await fs.send(reply, frame.request_id, frame.version)
        except (PeerClosed, OSError, trio.BrokenResourceError):
            pass
        finally:
            with trio.move_on_after(1):
                await fs.aclose()

    listeners = await trio.open_tcp_listeners(port, host=host or None)
    task_status.started(listeners)
    await trio.serve_listeners(answer, listeners)
