"""A standby controller's port: every request is answered "not the controller; the controller
is NAME" (code `standby`), so nodes and commands move on to the next SlurmctldHost at once;
a Ping is answered, so `rcontrol ping` shows the standby UP, as scontrol shows a backup. A
user's connection that opens with a MUNGE credential is answered the same way, signed with the
session key the credential carries (ctld/rpc/userauth.py), so the user reads the answer too."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import trio

from ranch.conf.model import AccessSettings
from ranch.ctld.rpc import userauth
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import UNPROVEN_MAX
from ranch.protocol.rawframe import FrameError
from ranch.protocol.tcp import RECEIVE_CHUNK, FramedStream, PeerClosed
from ranch.protocol.userauth import UNVERIFIED_KEY, may_open_with_credential, peek_credential

STANDBY = "standby"  # the Error code; protocol/versions.py notes it
REQUEST_TIMEOUT = 5.0


def not_the_controller(leader: str) -> m.Error:
    where = f"; the controller is {leader}" if leader else "; no controller holds the seat yet"
    return m.Error(STANDBY, f"not the controller{where}")


async def take_credential(fs: FramedStream, access: AccessSettings) -> None:
    """When the connection opens with a user's MUNGE credential, sign and check the rest with
    the session key it carries (ProtocolError, fatal, when munged refuses it: the refusal is
    then signed with UNVERIFIED_KEY, as the serving controller signs it)."""
    while True:
        buf = fs.decoder.pending()
        try:
            cred = peek_credential(buf, UNPROVEN_MAX)
        except FrameError as exc:
            fs.sign_with(UNVERIFIED_KEY)
            raise ProtocolError(exc.code, exc.message, fatal=True, version=exc.version) from None
        if cred:
            try:
                session, _uid, _gid = await userauth.session(access, cred)
            except ProtocolError:
                fs.sign_with(UNVERIFIED_KEY)
                raise
            fs.use_key(session)
            return
        if not may_open_with_credential(buf):
            return
        data = await fs.stream.receive_some(RECEIVE_CHUNK)
        if not data:
            return
        fs.decoder.feed(data)


async def serve(host: str, port: int, key: bytes, leader: Callable[[], str], cluster_name: str,
                version: str, access: AccessSettings, *,
                task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
    started = time.time()

    async def answer(stream: trio.SocketStream) -> None:
        fs = FramedStream(stream, key)
        try:
            with trio.move_on_after(REQUEST_TIMEOUT):
                try:
                    await take_credential(fs, access)
                except ProtocolError as exc:
                    await fs.send_error(exc)
                    return
                while True:
                    try:
                        frame = await fs.receive()
                    except ProtocolError as exc:
                        if exc.fatal:
                            return
                        await fs.send_error(exc)
                        continue
                    if isinstance(frame.msg, m.Credential):
                        continue  # taken in above: it asks nothing
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
