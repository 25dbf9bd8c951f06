"""Per-user request rate limits (SlurmctldParameters=rl_enable, as Slurm 23.02): a token bucket
per uid, checked before a request is dispatched; a user past it is told to back off.

As Slurm's src/slurmctld/rate_limit.c: root and SlurmUser are never limited (nor the cluster
key's holders: node daemons and root's commands), a user's first request finds a full bucket,
`refill_rate` tokens come back per whole `refill_period` seconds up to `bucket_size`, and at most
`table_size` users are tracked: a user who finds the table full is not limited (logged once),
so the table's memory is bounded whoever connects. The refusal is Slurm's
SLURMCTLD_COMMUNICATIONS_BACKOFF, whose text this keeps; commands sleep and retry on it
(cli/controller.py) as Slurm's do (1 s, 2 s, 3 s...)."""

from __future__ import annotations

import logging

import trio

from ranch.conf.model import ClusterConfig
from ranch.conf.ratelimit import RateLimitSettings, from_settings
from ranch.ctld import logs
from ranch.ctld.rights import Identity
from ranch.protocol import messages as m

BACKOFF = "backoff"  # the Error code (Slurm's SLURMCTLD_COMMUNICATIONS_BACKOFF, 1804)
BACKOFF_TEXT = "Rate limit exceeded, please retry momentarily"


def backoff() -> m.Error:
    return m.Error(BACKOFF, BACKOFF_TEXT)


class Buckets:
    """The token buckets, one per uid: [tokens, the period of the last refill]."""

    def __init__(self, settings: RateLimitSettings) -> None:
        self.settings = settings
        self.table: dict[int, list[int]] = {}
        self.refused = 0
        self._full_logged = False

    def take(self, uid: int, now: float) -> bool:
        """Take a token for `uid` at trio time `now`: False when its bucket is empty."""
        s = self.settings
        period = int(now // s.refill_period)
        bucket = self.table.get(uid)
        if bucket is None:
            if len(self.table) >= s.table_size:
                if not self._full_logged:
                    self._full_logged = True
                    logs.event("RPC rate limiting: ran out of user table space; user will not "
                               "be limited", logging.ERROR, table_size=s.table_size, uid=uid)
                return True
            self.table[uid] = [s.bucket_size - 1, period]
            return True
        if period != bucket[1]:
            bucket[0] = min(s.bucket_size, bucket[0] + (period - bucket[1]) * s.refill_rate)
            bucket[1] = period
        if bucket[0]:
            bucket[0] -= 1
            return True
        self.refused += 1
        return False


class RateLimits:
    """The rate limit of the config in force (rebuilt, buckets full, when the settings change)."""

    def __init__(self) -> None:
        self._config: ClusterConfig | None = None
        self.buckets: Buckets | None = None

    def refusal(self, config: ClusterConfig, who: Identity | None, kind: str) -> m.Error | None:
        """The reply to a request of `kind` from `who` (None: the cluster key's holder) when it
        is over its rate, else None."""
        if who is None or config is not self._config:
            if who is None:
                return None
            self._config = config
            settings = from_settings(config.settings)
            if self.buckets is None or self.buckets.settings != settings:
                self.buckets = Buckets(settings) if settings.enabled else None
        buckets = self.buckets
        # the Credential that opens a user's connection is no request of its own (userauth.py)
        if buckets is None or kind == "Credential" or exempt(config, who):
            return None
        if buckets.take(who.uid, trio.current_time()):
            return None
        logs.event("RPC rate limit exceeded; telling to back off", logging.INFO,
                   uid=who.uid, user=who.name, request=kind)
        return backoff()


def exempt(config: ClusterConfig, who: Identity) -> bool:
    """Root and SlurmUser, as Slurm's validate_slurm_user (AdminUsers are limited as anyone)."""
    return who.uid == 0 or config.access.slurm_user in (who.name, str(who.uid))
