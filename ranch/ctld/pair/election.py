"""The controller seat in etcd: campaign with a lease, keep it alive, and stop in time.

The seat is one key, P/leader, created only if absent (create revision 0) and bound to our
lease; its create revision is the epoch that fences every write of the winner
(ctld/state/etcdstore.py).
Keepalives go every TTL/3. etcd lets the lease go no sooner than TTL after the last renewal it
received, which is after we sent it: so a leader whose last good renewal was *sent* at t holds
the seat until t + TTL at least, and stops acting at t + TTL - MARGIN (self-fence) unless a
later renewal came back. The campaign polls every POLL seconds (cheaper to reason about than a
watch through the JSON gateway's streaming, and a standby's poll is one small read).
"""

from __future__ import annotations

import logging
import math

import orjson
import trio

from ranch.ctld import logs
from ranch.ctld.state.etcdclient import EtcdClient, EtcdError, created_at, get, put

MARGIN = 0.75  # seconds before the lease could lapse at which a leader stops acting
POLL = 0.5  # seconds between a standby's looks at the seat


class Election:
    """Owns its etcd connection (keepalives must not wait behind the store's writes)."""

    def __init__(self, client: EtcdClient, prefix: str, name: str, ttl: int) -> None:
        self.client = client
        self.prefix = prefix
        self.key = f"{prefix}/leader"
        self.name = name
        self.ttl = ttl
        self.lease = 0
        self.epoch = 0
        self.leader: str = ""  # who holds the seat, as last seen ("" unknown)
        self._renewed_sent = -math.inf  # when the last renewal that came back was sent
        self.lost = trio.Event()
        self.hold_off_until = 0.0  # after a takeover request: let the other side win

    @property
    def deadline(self) -> float:
        """trio time after which this leader must not act (its lease may have lapsed)."""
        return self._renewed_sent + self.ttl - MARGIN

    def alive(self) -> bool:
        return not self.lost.is_set() and trio.current_time() < self.deadline

    def fenced(self) -> None:
        """A write was refused, the lease ran out, or we step down: act no more."""
        if not self.lost.is_set():
            logs.event("controller seat lost; acting no more", logging.WARNING,
                       epoch=self.epoch, leader=self.leader or "unknown")
            self.lost.set()

    async def campaign(self) -> int:
        """Return the epoch once this controller holds the seat."""
        self.lost = trio.Event()
        while True:
            now = trio.current_time()
            if now < self.hold_off_until:
                await self.look()
                await trio.sleep(POLL)
                continue
            try:
                if not self.lease:
                    sent = trio.current_time()
                    self.lease = await self.client.grant(self.ttl)
                    self._renewed_sent = sent
                elif trio.current_time() - self._renewed_sent > self.ttl / 3:
                    sent = trio.current_time()
                    if await self.client.keepalive(self.lease) <= 0:
                        self.lease = 0
                        continue
                    self._renewed_sent = sent
                value = orjson.dumps({"name": self.name, "lease": self.lease})
                ok, doc = await self.client.txn([created_at(self.key, 0)],
                                                [put(self.key, value, self.lease)],
                                                [get(self.key)])
            except EtcdError as exc:
                logs.event("etcd unreachable while campaigning", logging.WARNING,
                           error=str(exc))
                await trio.sleep(POLL)
                continue
            if ok:
                self.epoch = int(doc["header"]["revision"])
                self.leader = self.name
                logs.event("controller seat won", epoch=self.epoch, name=self.name)
                return self.epoch
            kvs = (doc.get("responses") or [{}])[0].get("response_range", {}).get("kvs") or []
            if kvs:
                holder = _holder(kvs[0])
                # our own key from an earlier try whose answer was lost: the seat is ours
                if int(kvs[0].get("lease") or 0) == self.lease:
                    self.epoch = int(kvs[0]["create_revision"])
                    self.leader = self.name
                    logs.event("controller seat won", epoch=self.epoch, name=self.name)
                    return self.epoch
                if holder != self.leader:
                    logs.event("standing by", leader=holder)
                self.leader = holder
            await trio.sleep(POLL)

    async def look(self) -> str:
        """Who holds the seat now ("" none or unknown)."""
        try:
            kvs = await self.client.range(self.key)
        except EtcdError:
            return self.leader
        self.leader = _holder(kvs[0][2]) if kvs else ""
        return self.leader

    async def keep(self) -> None:
        """While leading: renew every TTL/3; once the deadline passes without a renewal, or
        etcd says the lease is gone, the seat is lost (self.lost is set) and this returns."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watchdog, nursery.cancel_scope)
            while not self.lost.is_set():
                sent = trio.current_time()
                try:
                    left = await self.client.keepalive(self.lease, timeout=self.ttl / 3)
                except EtcdError as exc:
                    logs.event("lease renewal failed", logging.WARNING, error=str(exc))
                    await trio.sleep(0.2)
                    continue
                if left <= 0:
                    self.fenced()
                    break
                self._renewed_sent = sent
                await trio.sleep(self.ttl / 3)
            nursery.cancel_scope.cancel()

    async def _watchdog(self, scope: trio.CancelScope) -> None:
        while not self.lost.is_set():
            wait = self.deadline - trio.current_time()
            if wait <= 0:
                logs.event("lease not renewed in time; stepping down", logging.WARNING,
                           ttl=self.ttl)
                self.fenced()
                break
            with trio.move_on_after(wait):
                await self.lost.wait()
        scope.cancel()

    async def resign(self, hold_off: float = 0.0) -> None:
        """Give the seat up now (a clean stop, or `rcontrol takeover`): the lease is revoked,
        so a standby wins at its next look instead of after the TTL."""
        self.fenced()
        self.hold_off_until = trio.current_time() + hold_off
        lease, self.lease = self.lease, 0
        if lease:
            try:  # shielded: the caller's own scope is usually what this stop cancels
                with trio.CancelScope(shield=True), trio.fail_after(2 * self.client.timeout):
                    await self.client.revoke(lease)
            except (EtcdError, trio.TooSlowError) as exc:
                logs.event("lease not revoked; the seat frees when it lapses", logging.WARNING,
                           error=str(exc))


def _holder(kv: dict) -> str:
    from ranch.ctld.state.etcdclient import unb64

    try:
        return str(orjson.loads(unb64(kv.get("value")))["name"])
    except (ValueError, KeyError, TypeError):
        return "?"
