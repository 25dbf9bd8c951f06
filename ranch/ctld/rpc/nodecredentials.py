"""The node credentials file: the SHA-256 of each credential that ctld/rpc/nodeident.py issued."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import trio

from ranch.ctld import logs
from ranch.ctld.state import integrity
from ranch.ctld.state.integrity import DamagedState
from ranch.protocol import durable

FILE = "node_credentials.json"
CRED_BYTES = 32


def _digest(credential: str) -> str:
    return hashlib.sha256(credential.encode("utf-8", "replace")).hexdigest()


class NodeCredentials:
    """The SHA-256 of each node's credential, kept in the state dir (None: in memory only)."""

    def __init__(self, state_dir: str | None,
                 mirror: Callable[[str, bytes], Awaitable[None]] | None = None) -> None:
        self.path = os.path.join(state_dir, FILE) if state_dir else None
        # a controller pair (ctld/state/etcdstore.py): the file is copied into etcd before a reply
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
        # the nodes whose credential is in the file on disk (a snapshot names them, so that
        # the file gone missing is refused at start: ctld/state/continuity.py)
        self.on_disk: tuple[str, ...] = ()
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
        self.on_disk = tuple(self.hashes)
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
            names = tuple(self.hashes)  # as written (more may be issued while it is)
            await trio.to_thread.run_sync(_write, self.path, data)
            if self.mirror is not None:
                await self.mirror(FILE, data)
            self._saved = gen
            self.on_disk = names


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


def set_aside_if_damaged(state_dir: str) -> None:
    """rctld -i: a damaged file is moved aside (before the server reads it); every node is
    issued a new credential."""
    try:
        read(os.path.join(state_dir, FILE))
    except DamagedState as exc:
        aside = integrity.move_aside(exc.path)
        logs.event("damaged node credentials moved aside (-i); every node gets a new one",
                   logging.ERROR, path=exc.path, error=exc.what, moved_to=aside)
