"""A standby controller's port: every request is answered "not the controller; the controller
is NAME" (code `standby`), so nodes and commands move on to the next SlurmctldHost at once;
a Ping is answered, so `rcontrol ping` shows the standby UP, as scontrol shows a backup. A
user's connection that opens with a MUNGE credential is answered the same way, signed with the
session key the credential carries (ctld/rpc/userauth.py), so the user reads the answer too.
With SlurmctldParameters=standby_read_ms=N (`reads`), the listings are answered from the
standby's copy of the state, with its age (ctld/pair/standbyreads.py), under the same rights
as the leader's (ctld/rpc/permissions.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

import attrs
import trio

from ranch.conf.model import AccessSettings, ClusterConfig
from ranch.ctld.pair.standbyreads import StandbyReads
from ranch.ctld.rights import Identity, identify
from ranch.ctld.rpc import permissions, userauth
from ranch.ctld.rpc.wire import Prebuilt, encode_body_frame
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


async def take_credential(fs: FramedStream, access: AccessSettings) -> tuple[int, int] | None:
    """When the connection opens with a user's MUNGE credential, sign and check the rest with
    the session key it carries (ProtocolError, fatal, when munged refuses it: the refusal is
    then signed with UNVERIFIED_KEY, as the serving controller signs it); the user's (uid,
    gid), None for the cluster key's holder."""
    while True:
        buf = fs.decoder.pending()
        try:
            cred = peek_credential(buf, UNPROVEN_MAX)
        except FrameError as exc:
            fs.sign_with(UNVERIFIED_KEY)
            raise ProtocolError(exc.code, exc.message, fatal=True, version=exc.version) from None
        if cred:
            try:
                session, uid, gid = await userauth.session(access, cred)
            except ProtocolError:
                fs.sign_with(UNVERIFIED_KEY)
                raise
            fs.use_key(session)
            return uid, gid
        if not may_open_with_credential(buf):
            return None
        data = await fs.stream.receive_some(RECEIVE_CHUNK)
        if not data:
            return None
        fs.decoder.feed(data)


@attrs.frozen
class Caller:
    """Who asks, as the permission rules read a connection (ctld/rpc/permissions.py)."""

    peer: str
    who: Identity | None = None


def listing(reads: StandbyReads, config: ClusterConfig, caller: Caller, msg: Any,
            leader: str) -> Any:
    """A listing's answer from the standby's copy, under the leader's rules; "not the
    controller" when the copy cannot be proven fresh enough."""
    msg, refused, after = permissions.gate(config, cast(Any, caller), msg)
    if refused is not None:
        return refused
    reply = reads.answer(msg)
    if reply is None:
        return not_the_controller(leader)
    return reply if after is None else after(reply)


async def serve(host: str, port: int, key: bytes, leader: Callable[[], str], cluster_name: str,
                version: str, access: AccessSettings, *, reads: StandbyReads | None = None,
                config: ClusterConfig | None = None,
                task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
    """`reads` and `config`: the listings are answered (standby_read_ms); else only Ping."""
    started = time.time()

    async def answer(stream: trio.SocketStream) -> None:
        fs = FramedStream(stream, key)
        try:
            with trio.move_on_after(REQUEST_TIMEOUT):
                try:
                    user = await take_credential(fs, access)
                except ProtocolError as exc:
                    await fs.send_error(exc)
                    return
                caller = Caller(_peer(stream), None if user is None or config is None
                                else identify(config, *user))
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
                    elif reads is not None and config is not None and reads.wants(frame.msg):
                        reply = listing(reads, config, caller, frame.msg, leader())
                    else:
                        reply = not_the_controller(leader())
                    if isinstance(reply, Prebuilt):  # a listing's body, encoded once
                        await fs.stream.send_all(encode_body_frame(
                            reply.type_name, reply.body, fs.key, request_id=frame.request_id,
                            version=frame.version))
                    else:
                        await fs.send(reply, frame.request_id, frame.version)
        except (PeerClosed, OSError, trio.BrokenResourceError):
            pass
        finally:
            with trio.move_on_after(1):
                await fs.aclose()

    listeners = await trio.open_tcp_listeners(port, host=host or None)
    task_status.started(listeners)
    await trio.serve_listeners(answer, listeners)


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError, ValueError):
        return "?"
