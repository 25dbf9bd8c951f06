"""A small etcd v3 client for trio: JSON gateway (/v3/...) over one kept trio TCP stream.

Why our own: measured from trio (shared/ha-reference.md), a client on trio + h11 costs 0.61 ms of
CPU per fenced write; httpx 1.25-1.61 ms, etcd3gw through a thread 2.0 ms, aetcd needs asyncio
and grpcio (+26 MB). rctld needs five calls (range, txn, lease grant/keepalive/revoke), all
POSTs of JSON to one server whose replies are Go net/http's, so the HTTP here is only that: a
request line and three headers out; a status line, Content-Length or chunked in. Measured here
against h11 on the same connection: 0.20-0.26 ms of CPU per fenced write against 0.42 (h11's
event machinery was half of it), and rctld writes twice per submission (issue 32's goal: etcd
within 1.5x the file store's CPU per submission).

Each call has a short deadline and moves on to the next endpoint when one is silent, refuses the
connection or closes it: a member cut off from the majority holds a request until etcd's own
timeout, longer than a controller can wait. Every write rctld sends is idempotent (a put of the
same key and value, guarded by the same compare), so sending it again to another member is safe.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import trio

MAX_HEAD = 64 << 10  # bytes of reply head before the reply is refused


class EtcdError(OSError):
    """etcd refused a request (its message), or no endpoint answered in time."""


class EtcdUnavailable(EtcdError):
    """No endpoint answered within the deadline."""


def b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def prefix_end(prefix: str | bytes) -> bytes:
    """The range end that covers every key starting with `prefix` (etcd's clientv3 rule)."""
    raw = bytearray(prefix.encode() if isinstance(prefix, str) else prefix)
    for i in range(len(raw) - 1, -1, -1):
        if raw[i] < 0xFF:
            raw[i] += 1
            return bytes(raw[: i + 1])
    return b"\0"


class EtcdClient:
    """One keep-alive HTTP/1.1 connection at a time, to the endpoint that answered last; calls
    are serialized (an owner that needs calls to overlap, as the lease keepalive must with
    the store's writes, uses a client of its own)."""

    def __init__(self, endpoints: tuple[str, ...] | list[str], timeout: float = 1.5) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoints")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self._at = 0  # index of the endpoint in use
        self._stream: trio.SocketStream | None = None
        self._buf = bytearray()  # what came after the last reply (nothing, with etcd)
        self._lock = trio.Lock()
        self.calls = 0

    @property
    def endpoint(self) -> str:
        return self.endpoints[self._at]

    async def call(self, path: str, body: dict[str, Any], *, timeout: float | None = None,
                   rounds: int = 1) -> dict[str, Any]:
        """POST `body` to /v3/`path` on each endpoint in turn (from the last good one) until
        one answers; its JSON reply. EtcdError for etcd's refusal, EtcdUnavailable if none."""
        payload = orjson.dumps(body)
        last = "no endpoint tried"
        async with self._lock:
            for _ in range(rounds * len(self.endpoints)):
                host = self.endpoints[self._at]
                with trio.move_on_after(timeout or self.timeout) as scope:
                    try:
                        status, data = await self._post(host, "/v3/" + path, payload)
                    except (OSError, ValueError, trio.BrokenResourceError,
                            trio.ClosedResourceError) as exc:
                        last = f"{host}: {exc.__class__.__name__}: {exc}"
                        self._drop()
                        self._at = (self._at + 1) % len(self.endpoints)
                        continue
                    except BaseException:
                        # cancelled from outside mid-request: its reply would be read as the
                        # next request's, so the connection goes with it
                        self._drop()
                        raise
                if scope.cancelled_caught:
                    last = f"{host}: no answer within {timeout or self.timeout:g} s"
                    self._drop()
                    self._at = (self._at + 1) % len(self.endpoints)
                    continue
                self.calls += 1
                try:
                    doc = orjson.loads(data) if data else {}
                except orjson.JSONDecodeError:
                    raise EtcdError(f"etcd {host}: unreadable reply ({status})") from None
                if status != 200:
                    msg = doc.get("message") or doc.get("error") or data[:200].decode("replace")
                    if status >= 500 and "leader" in str(msg):  # member without a raft leader
                        last = f"{host}: {msg}"
                        self._drop()
                        self._at = (self._at + 1) % len(self.endpoints)
                        continue
                    raise EtcdError(f"etcd {host}: {msg}")
                return doc
        raise EtcdUnavailable(f"etcd unavailable: {last}")

    async def _post(self, host: str, target: str, payload: bytes) -> tuple[int, bytes]:
        """One request on the kept connection; (status, body). etcd's gateway is Go's
        net/http: a body comes with Content-Length or chunked, or runs to the end of stream."""
        if self._stream is None:
            name, _, port = host.rpartition(":")
            self._stream = await trio.open_tcp_stream(name, int(port))
            self._buf = bytearray()
        stream = self._stream
        await stream.send_all(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json"
                              b"\r\nContent-Length: %d\r\n\r\n%s"
                              % (target.encode(), host.encode(), len(payload), payload))
        buf = self._buf
        while (end := buf.find(b"\r\n\r\n")) < 0:
            if len(buf) > MAX_HEAD:
                raise EtcdError(f"etcd {host}: reply head over {MAX_HEAD} bytes")
            await self._more(buf)
        lines = bytes(buf[:end]).split(b"\r\n")
        del buf[:end + 4]
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            raise EtcdError(f"etcd {host}: not an HTTP reply: {lines[0][:80]!r}") from None
        length, chunked, close = -1, False, lines[0].startswith(b"HTTP/1.0")
        for line in lines[1:]:
            key, _, value = line.partition(b":")
            key, value = key.strip().lower(), value.strip().lower()
            if key == b"content-length":
                length = int(value)
            elif key == b"transfer-encoding":
                chunked = value == b"chunked"
            elif key == b"connection":
                close = value == b"close"
        if chunked:
            body = await self._read_chunked(buf)
        elif length >= 0:
            while len(buf) < length:
                await self._more(buf)
            body = buf[:length]
            del buf[:length]
        else:  # to the end of the stream
            while await self._more(buf, eof_ok=True):
                pass
            body, close = bytearray(buf), True
            buf.clear()
        if close:
            self._drop()
        return status, bytes(body)

    async def _read_chunked(self, buf: bytearray) -> bytearray:
        """A chunked body, and its trailer, taken from the front of `buf`."""
        body = bytearray()
        while True:
            while (eol := buf.find(b"\r\n")) < 0:
                await self._more(buf)
            size = int(bytes(buf[:eol]).split(b";")[0], 16)
            del buf[:eol + 2]
            if size == 0:
                break
            while len(buf) < size + 2:
                await self._more(buf)
            body += buf[:size]
            del buf[:size + 2]
        # trailer lines up to an empty one: etcd's refusals (a compacted revision) carry
        # Grpc-Trailer-* fields, and leaving them would be read as the next reply's head
        while True:
            while (eol := buf.find(b"\r\n")) < 0:
                await self._more(buf)
            del buf[:eol + 2]
            if eol == 0:
                break
        return body

    async def _more(self, buf: bytearray, eof_ok: bool = False) -> bool:
        assert self._stream is not None
        data = await self._stream.receive_some(1 << 16)
        if not data:
            if eof_ok:
                return False
            raise trio.BrokenResourceError("connection closed by etcd")
        buf += data
        return True

    def _drop(self) -> None:
        stream, self._stream = self._stream, None
        self._buf = bytearray()
        if stream is not None:
            stream.socket.close()

    async def aclose(self) -> None:
        self._drop()

    # -- the calls rctld makes ------------------------------------------------------------

    async def range(self, key: str, end: bytes | None = None, *, limit: int = 0,
                    keys_only: bool = False,
                    revision: int = 0) -> list[tuple[bytes, bytes, dict[str, Any]]]:
        """[(key, value, kv)] of `key` (or of [key, end)), in key order; as of `revision`
        when given (EtcdError once etcd has compacted past it)."""
        body: dict[str, Any] = {"key": b64(key)}
        if revision:
            body["revision"] = revision
        if end is not None:
            body["range_end"] = b64(end)
        if limit:
            body["limit"] = limit
        if keys_only:
            body["keys_only"] = True
        doc = await self.call("kv/range", body)
        return [(unb64(kv.get("key")), unb64(kv.get("value")), kv) for kv in doc.get("kvs", ())]

    async def revision(self, key: str) -> int:
        """etcd's current revision (read beside `key`): reads pinned to it see one moment of
        the store."""
        doc = await self.call("kv/range", {"key": b64(key), "limit": 1, "keys_only": True})
        return int(doc.get("header", {}).get("revision", 0))

    async def txn(self, compare: list[dict[str, Any]], success: list[dict[str, Any]],
                  failure: list[dict[str, Any]] | None = None,
                  timeout: float | None = None) -> tuple[bool, dict[str, Any]]:
        """(whether the compare held, the reply); the gateway leaves a false `succeeded` out."""
        body: dict[str, Any] = {"compare": compare, "success": success}
        if failure:
            body["failure"] = failure
        doc = await self.call("kv/txn", body, timeout=timeout)
        return bool(doc.get("succeeded")), doc

    async def grant(self, ttl: int) -> int:
        doc = await self.call("lease/grant", {"TTL": ttl})
        if doc.get("error"):
            raise EtcdError(f"etcd lease grant: {doc['error']}")
        return int(doc["ID"])

    async def keepalive(self, lease: int, timeout: float | None = None) -> int:
        """The lease's remaining TTL after renewal; 0 when it has expired."""
        doc = await self.call("lease/keepalive", {"ID": lease}, timeout=timeout)
        return int((doc.get("result") or {}).get("TTL") or 0)

    async def revoke(self, lease: int) -> None:
        await self.call("lease/revoke", {"ID": lease})


def put(key: str | bytes, value: bytes, lease: int = 0) -> dict[str, Any]:
    op: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        op["lease"] = lease
    return {"request_put": op}


def delete_range(key: str | bytes, end: bytes) -> dict[str, Any]:
    return {"request_delete_range": {"key": b64(key), "range_end": b64(end)}}


def get(key: str | bytes) -> dict[str, Any]:
    return {"request_range": {"key": b64(key)}}


def created_at(key: str | bytes, revision: int) -> dict[str, Any]:
    """A compare: the key's create revision is `revision` (0: the key does not exist)."""
    return {"key": b64(key), "target": "CREATE", "result": "EQUAL",
            "create_revision": revision}
