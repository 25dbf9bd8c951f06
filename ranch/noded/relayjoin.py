"""A relayed node's side (issue 47): which relays to try, and joining one.

With RelayNodes= in the served config, a node that holds its node credential tries its relay
first (protocol/relaymessages.py:relay_order), the other relays after it, then the controllers;
one that has none yet (a new node) registers straight to rctld to be issued it, since the
credential must never cross a relay. Through a relay the session is signed with the node key,
both ways: the relay forwards what it cannot read or forge.
"""

from __future__ import annotations

import logging

import trio

from ranch.noded.link import LOST
from ranch.protocol.errors import ProtocolError
from ranch.protocol.messages import Ack, Error, NodeSettings, RelayJoin
from ranch.protocol.relaymessages import node_key, parse_entry, relay_order
from ranch.protocol.tcp import FramedStream

log = logging.getLogger("rnoded")

Target = tuple[str, int, str | None]  # host, port, the relay's name (None: a controller)


def targets(name: str, settings: NodeSettings | None, credential: str,
            controllers: tuple[tuple[str, int], ...]) -> tuple[Target, ...]:
    """Where to connect, in order: the node's relays (only with a credential), then the
    controllers."""
    relays: tuple[Target, ...] = ()
    if settings is not None and settings.relays and credential:
        try:
            relays = tuple((host, port, relay) for relay, host, port
                           in map(parse_entry, relay_order(name, settings.relays)))
        except ValueError as exc:
            log.warning("served relay list unusable (%s); connecting to the controller", exc)
    return relays + tuple((host, port, None) for host, port in controllers)


async def join(fs: FramedStream, name: str, credential: str, version: int,
               timeout: float) -> str | None:
    """Join the relay at the other end of `fs`: None once joined (the stream now signs and
    checks with the node key), else why not (try the next)."""
    try:
        with trio.move_on_after(timeout):
            await fs.send(RelayJoin(name), 1, version)
            frame = await fs.receive()
            if isinstance(frame.msg, Ack):
                fs.use_key(node_key(credential))
                return None
            if isinstance(frame.msg, Error):
                return f"{frame.msg.code}: {frame.msg.message}"
            return f"answered {frame.type}"
    except (ProtocolError, *LOST) as exc:
        return str(exc) or type(exc).__name__
    return f"no answer within {timeout:g} s"
