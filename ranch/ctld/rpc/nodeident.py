"""Node identity (issue 19): each node proves its name with the credential rctld issued it.

The first accepted registration under a name (auto-admitted, or waiting for `rcontrol approve`)
is answered with a fresh random credential, which rnoded keeps 0600 in its spool dir
(noded/identity.py) and presents in every later Register. rctld keeps only its SHA-256, in
StateSaveLocation/node_credentials.json, written (fsync, atomic rename) before the reply that
carries it leaves. A registration under that name without it, or with another, is refused and
recorded as a `refused` event, and never reaches the node's record: a second process holding
the cluster key can no longer disconnect a live node, set it DOWN or kill its jobs.

A rebuilt machine has lost its credential: `rcontrol approve NodeName=...` (re-approval of a
member) or `rcontrol delete NodeName=...` (a dynamic node) forgets the old one, and the next
registration is issued a new one. An rnoded from before node credentials (its Register carries
none, not even empty) is not issued one and registers as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ranch.ctld import logs
from ranch.ctld.rpc.nodecredentials import CRED_BYTES, FILE, NodeCredentials, read
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from ranch.ctld.nodes.node import NodeRecord
    from ranch.ctld.rpc.connection import Connection
    from ranch.ctld.rpc.rpcports import EventFeed

__all__ = ["CRED_BYTES", "FILE", "NodeCredentials", "read"]

# -- the Register route -------------------------------------------------------------------------


def refusal(book: NodeCredentials, nodes: Mapping[str, NodeRecord], log: EventFeed,
            conn: Connection, msg: m.Register) -> m.RegisterReply | None:
    """A Register that does not carry the credential on file for its name: refused, logged and
    recorded in `log`, before it touches anything of the node (`nodes`: who is connected).
    Through a relay (ctld/rpc/relayhub.py) the node's key proved its name, and the credential
    itself never crosses the relay: the Register must name that node."""
    proven = getattr(conn, "proven_name", None)
    if proven is not None:
        if proven == msg.name:
            return None
        reason = f"a frame signed with node {proven}'s key registers node {msg.name}"
        logs.event("relayed registration refused", logging.WARNING, node=msg.name,
                   peer=conn.peer, signed_by=proven)
        log.add("refused", msg.name, reason=reason, peer=conn.peer, credential="wrong")
        return m.RegisterReply(accepted=False, reason=reason)
    ok = book.matches(msg.name, msg.node_credential)
    if ok is None or ok:
        return None
    live = nodes.get(msg.name)
    live_conn = live.conn if live is not None else None
    if live_conn is None and msg.name in book.unconfirmed:
        return None  # it died before it could keep its credential: issue() gives a new one
    said = "another node credential" if msg.node_credential else "no node credential"
    reason = (f"node {msg.name} registered with {said}, but {msg.name} was issued one "
              f"{'and is connected now' if live_conn is not None else 'before'}; if this "
              f"machine was rebuilt, an admin lets it in again with: rcontrol approve "
              f"NodeName={msg.name}")
    logs.event("registration refused: wrong node credential", logging.WARNING, node=msg.name,
               peer=conn.peer, live_peer=getattr(live_conn, "peer", None) or "-")
    log.add("refused", msg.name, reason=reason, peer=conn.peer,
            credential="missing" if not msg.node_credential else "wrong")
    return m.RegisterReply(accepted=False, reason=reason)


def issue(book: NodeCredentials, log: EventFeed, msg: m.Register, reply: Any) -> Any:
    """The reply, with a new credential when this is the node's first accepted registration
    (an awaitable then: the reply leaves once the credential's hash is on disk)."""
    if type(reply) is m.RegisterReply and reply.accepted and msg.node_credential and \
            book.matches(msg.name, msg.node_credential):
        book.confirm(msg.name)  # it came back with it: it keeps it
        return reply
    if (type(reply) is not m.RegisterReply or not reply.accepted or msg.node_credential is None
            or book.matches(msg.name, msg.node_credential)):
        return reply
    credential = book.issue(msg.name)
    logs.event("node credential issued", node=msg.name)
    log.add("credential_issued", msg.name)

    async def saved() -> m.RegisterReply:
        await book.persist()
        return attrs.evolve(reply, node_credential=credential)

    return saved()


# -- rcontrol approve | delete ------------------------------------------------------------------


def membership(book: NodeCredentials, log: EventFeed,
               handle: Callable[[m.NodeMembership], m.UpdateResult],
               msg: m.NodeMembership) -> Any:
    """`handle`'s answer (ctld/nodes/membership.py), then: a node approved or deleted loses its
    credential, and approving a member that holds one is re-approval (a rebuilt machine may
    register anew)."""
    result = handle(msg)
    action = msg.action.lower()
    if action not in ("approve", "delete"):
        return result
    changed = list(result.changed)
    errors = list(result.errors)

    def revoke(name: str) -> bool:
        if not book.forget(name):
            return False
        logs.event("node credential revoked", node=name, user=msg.user or "-", action=action)
        log.add("credential_revoked", name, user=msg.user or None)
        return True

    for name in result.changed:
        revoke(name)
    if action == "approve":
        for err in list(errors):
            member = _member_named(err, book)
            if member is not None and revoke(member):
                errors.remove(err)
                changed.append(name)
    result = m.UpdateResult(ok=not errors, changed=tuple(changed), errors=tuple(errors))

    async def saved() -> m.UpdateResult:
        await book.persist()
        return result

    return saved()


def _member_named(error: str, book: NodeCredentials) -> str | None:
    """The node of an "already a member" refusal of approve that holds a credential."""
    if "already a member" not in error:
        return None
    for name in book.hashes:
        if f"node {name}:" in error or f"node {name} " in error:
            return name
    return None
