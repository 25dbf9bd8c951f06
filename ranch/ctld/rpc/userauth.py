"""rctld's side of AuthType=auth/munge: a connection that opens with a Credential frame is the
user munged vouches for, and is signed with the session key the credential carries
(protocol/userauth.py says how; ctld/rpc/permissions.py what that user may do).

munge_decode is a round trip to the local munged (tenths of a millisecond, bench/munge_cost.py),
made in a worker thread so the event loop never waits on munged; at most DECODERS at once, so a
flood of credentials cannot take every thread.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from ranch.ctld import logs
from ranch.ctld.rights import identify
from ranch.protocol import munge
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import FrameDecoder
from ranch.protocol.rawframe import FrameError
from ranch.protocol.userauth import SESSION_KEY_BYTES, UNVERIFIED_KEY, peek_credential

if TYPE_CHECKING:
    from collections.abc import Callable

    from ranch.conf.model import AccessSettings, ClusterConfig
    from ranch.ctld.rpc.admission import QuietLog
    from ranch.ctld.rpc.connection import Connection

DECODERS = 4
_limiter: trio.CapacityLimiter | None = None


def offered(conn: Connection, decoder: FrameDecoder, limit: int) -> str | None:
    """The credential a not-yet-proven connection opens with, once its frame is whole."""
    try:
        return peek_credential(decoder.pending(), limit)
    except FrameError as exc:
        conn.key = UNVERIFIED_KEY
        raise ProtocolError(exc.code, exc.message, fatal=True, version=exc.version) from None


async def accept(config: Callable[[], ClusterConfig], log: QuietLog, conn: Connection,
                 decoder: FrameDecoder, cred: str) -> None:
    """Decode `cred` with munged: the connection becomes its user's, and the decoder and the
    replies use its session key (`config`: the one in force; `log`: where refusals are told,
    quietly). ProtocolError("auth") when munged refuses it (replayed,
    expired, another key) or when this controller does not run auth/munge."""
    conn.key = UNVERIFIED_KEY  # a refusal is signed with a key the client knows (userauth.py)

    def refused(exc: munge.MungeError) -> None:
        log.event(f"munge:{exc.code}", "munge credential refused",
                                   peer=conn.peer, error=str(exc), code=exc.name or exc.code)

    key, uid, gid = await session(config().access, cred, refused)
    who = identify(config(), uid, gid)
    conn.who = who
    conn.key = key
    decoder.key = key
    logs.event("user connected", logging.DEBUG, peer=conn.peer, user=who.name, uid=who.uid,
               admin=who.admin)


async def session(access: AccessSettings, cred: str,
                  refused: Callable[[munge.MungeError], None] | None = None
                  ) -> tuple[bytes, int, int]:
    """(session key, uid, gid) of a Credential frame's `cred`, decoded by munged (the serving
    controller's connections and a standby's: ctld/pair/standby.py). ProtocolError("auth") when
    munged refuses it (`refused` is told why first) or this controller does not run
    auth/munge; the refusal is to be signed with UNVERIFIED_KEY."""
    global _limiter
    if access.auth_type != "auth/munge":
        raise _refusal("this controller does not accept MUNGE credentials (its config has no "
                       "AuthType=auth/munge); use the cluster key (--key-file)")
    if _limiter is None:
        _limiter = trio.CapacityLimiter(DECODERS)
    socket = access.munge_socket
    try:
        got = await trio.to_thread.run_sync(lambda: munge.decode(cred, socket=socket),
                                            limiter=_limiter)
    except munge.MungeError as exc:
        if refused is not None:
            refused(exc)
        raise _refusal(f"{exc} ({exc.name})" if exc.name else str(exc)) from None
    if len(got.payload) != SESSION_KEY_BYTES:
        raise _refusal("munge credential carries no session key (not made by a Ranch command)")
    return got.payload, got.uid, got.gid


def _refusal(message: str) -> ProtocolError:
    return ProtocolError("auth", message, fatal=True)
