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

import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import orjson
import trio

from ranch.ctld import integrity, logs
from ranch.ctld.integrity import DamagedState
from ranch.protocol import durable
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from ranch.ctld.cluster import Cluster
    from ranch.ctld.server import Connection, Server

FILE = "node_credentials.json"
CRED_BYTES = 32


def _digest(credential: str) -> str:
    return hashlib.sha256(credential.encode("utf-8", "replace")).hexdigest()


class NodeCredentials:
    """The SHA-256 of each node's credential, kept in the state dir (None: in memory only)."""

    def __init__(self, state_dir: str | None,
                 mirror: Callable[[str, bytes], Awaitable[None]] | None = None) -> None:
        self.path = os.path.join(state_dir, FILE) if state_dir else None
        # a controller pair (ctld/etcdstore.py): the file is copied into etcd before a reply
        # that carries a new credential leaves, and back from it when a controller takes over
        self.mirror = mirror
        self.hashes: dict[str, str] = {}
        # Issued, and the node has not shown yet that it kept it (no heartbeat after the
        # RegisterReply that carried it): an rnoded killed in between comes back without one,
        # and may, while its name has no live connection (a new one is issued then).
        self.unconfirmed: set[str] = set()
        self._gen = 0  # changes made
        self._saved = 0  # changes on disk
        self._lock: trio.Lock | None = None
        if self.path is not None:
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        doc = read(self.path)
        if doc is None:
            return
        self.hashes = {str(k): str(v["sha256"]) for k, v in doc["nodes"].items()}
        self.unconfirmed = {str(k) for k, v in doc["nodes"].items()
                            if v.get("confirmed") is False}
        logs.event("node credentials restored", path=self.path, nodes=len(self.hashes))

    def matches(self, name: str, credential: str | None) -> bool | None:
        """None: no credential is on file for `name`; else whether `credential` is it."""
        want = self.hashes.get(name)
        if want is None:
            return None
        return bool(credential) and hmac.compare_digest(want, _digest(credential or ""))

    def issue(self, name: str) -> str:
        credential = secrets.token_urlsafe(CRED_BYTES)
        self.hashes[name] = _digest(credential)
        self.unconfirmed.add(name)
        self._gen += 1
        return credential

    def confirm(self, name: str) -> None:
        """The node spoke again on the connection that received its credential: it keeps it
        (rnoded saves it before its first heartbeat). Written with the next change."""
        if name in self.unconfirmed:
            self.unconfirmed.discard(name)
            self._gen += 1

    def forget(self, name: str) -> bool:
        self.unconfirmed.discard(name)
        if self.hashes.pop(name, None) is None:
            return False
        self._gen += 1
        return True

    async def persist(self) -> None:
        """Every change made so far is on disk when this returns (one write covers all the
        changes waiting for it: a registration storm of new nodes is a few writes)."""
        if self.path is None or self._saved >= self._gen:
            return
        if self._lock is None:
            self._lock = trio.Lock()
        target = self._gen
        async with self._lock:
            if self._saved >= target:
                return
            gen = self._gen
            doc = {"version": 1, "nodes": {
                k: {"sha256": v, **({"confirmed": False} if k in self.unconfirmed else {})}
                for k, v in self.hashes.items()}}
            data = integrity.seal(orjson.dumps(doc))
            await trio.to_thread.run_sync(_write, self.path, data)
            if self.mirror is not None:
                await self.mirror(FILE, data)
            self._saved = gen


def read(path: str) -> dict[str, Any] | None:
    """The credentials file's document (None: there is none). Unreadable or damaged, it is
    refused (DamagedState): starting without it would let anyone take a node's name, so rctld
    stops and says why (-i moves the file aside: every node is then issued a new credential)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DamagedState(path, 0, f"cannot be read ({exc.strerror or exc})") from None
    _sealed, problem = integrity.check(raw)
    if problem is not None:
        raise DamagedState(path, 0, problem)
    try:
        doc = orjson.loads(raw)
        for v in doc["nodes"].values():
            str(v["sha256"])
    except orjson.JSONDecodeError as exc:
        raise DamagedState(path, exc.pos, f"not valid JSON ({exc.msg})") from None
    except (KeyError, TypeError, AttributeError):
        raise DamagedState(path, 0, 'not a credentials file ({"nodes": {NAME: {"sha256": ...}}})'
                           ) from None
    return doc


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    durable.write_atomic(path, data)


# -- the Register route -------------------------------------------------------------------------


def refusal(server: Server, conn: Connection, msg: m.Register) -> m.RegisterReply | None:
    """A Register that does not carry the credential on file for its name: refused, logged and
    recorded, before it touches anything of the node."""
    ok = server.node_credentials.matches(msg.name, msg.node_credential)
    if ok is None or ok:
        return None
    live = server.cluster.nodes.get(msg.name)
    live_conn = live.conn if live is not None else None
    if live_conn is None and msg.name in server.node_credentials.unconfirmed:
        return None  # it died before it could keep its credential: issue() gives a new one
    said = "another node credential" if msg.node_credential else "no node credential"
    reason = (f"node {msg.name} registered with {said}, but {msg.name} was issued one "
              f"{'and is connected now' if live_conn is not None else 'before'}; if this "
              f"machine was rebuilt, an admin lets it in again with: rcontrol approve "
              f"NodeName={msg.name}")
    logs.event("registration refused: wrong node credential", logging.WARNING, node=msg.name,
               peer=conn.peer, live_peer=getattr(live_conn, "peer", None) or "-")
    server.cluster.eventlog.add("refused", msg.name, reason=reason, peer=conn.peer,
                                credential="missing" if not msg.node_credential else "wrong")
    return m.RegisterReply(accepted=False, reason=reason)


def issue(server: Server, msg: m.Register, reply: Any) -> Any:
    """The reply, with a new credential when this is the node's first accepted registration
    (an awaitable then: the reply leaves once the credential's hash is on disk)."""
    book = server.node_credentials
    if type(reply) is m.RegisterReply and reply.accepted and msg.node_credential and \
            book.matches(msg.name, msg.node_credential):
        book.confirm(msg.name)  # it came back with it: it keeps it
        return reply
    if (type(reply) is not m.RegisterReply or not reply.accepted or msg.node_credential is None
            or book.matches(msg.name, msg.node_credential)):
        return reply
    credential = book.issue(msg.name)
    logs.event("node credential issued", node=msg.name)
    server.cluster.eventlog.add("credential_issued", msg.name)

    async def saved() -> m.RegisterReply:
        await book.persist()
        return attrs.evolve(reply, node_credential=credential)

    return saved()


# -- rcontrol approve | delete ------------------------------------------------------------------


def membership(server: Server, msg: m.NodeMembership,
               handle: Callable[[Cluster, m.NodeMembership], m.UpdateResult]) -> Any:
    """`handle` (ctld/membership.py), then: a node approved or deleted loses its credential, and
    approving a member that holds one is re-approval (a rebuilt machine may register anew)."""
    result = handle(server.cluster, msg)
    action = msg.action.lower()
    if action not in ("approve", "delete"):
        return result
    book = server.node_credentials
    changed = list(result.changed)
    errors = list(result.errors)

    def revoke(name: str) -> bool:
        if not book.forget(name):
            return False
        logs.event("node credential revoked", node=name, user=msg.user or "-", action=action)
        server.cluster.eventlog.add("credential_revoked", name, user=msg.user or None)
        return True

    for name in result.changed:
        revoke(name)
    if action == "approve":
        for err in list(errors):
            name = _member_named(err, book)
            if name is not None and revoke(name):
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
