"""SlurmctldParameters' rl_* options (Slurm 23.02's rate limit) and read_cache_ms, read purely."""

from __future__ import annotations

import attrs

# Slurm 23.02's src/slurmctld/rate_limit.c defaults
TABLE_SIZE, BUCKET_SIZE, REFILL_RATE, REFILL_PERIOD = 8192, 30, 2, 1


@attrs.frozen(slots=True)
class RateLimitSettings:
    enabled: bool = False  # rl_enable
    table_size: int = TABLE_SIZE  # rl_table_size: users tracked at most
    bucket_size: int = BUCKET_SIZE  # rl_bucket_size: tokens a full bucket holds
    refill_rate: int = REFILL_RATE  # rl_refill_rate: tokens added each period
    refill_period: int = REFILL_PERIOD  # rl_refill_period: seconds


def rate_limit_settings(params: str) -> tuple[RateLimitSettings, list[str]]:
    """(the settings `params`, a SlurmctldParameters value, asks for; warnings). As Slurm 23.02.5+:
    a value that is not a whole number above 0 is refused and the default kept."""
    found: dict[str, int] = {}
    warnings: list[str] = []
    enabled = False
    for option in params.split(","):
        name, eq, value = (s.strip() for s in option.partition("="))
        name = name.lower()
        if name == "rl_enable" and not eq:
            enabled = True
        elif name in ("rl_table_size", "rl_bucket_size", "rl_refill_rate", "rl_refill_period"):
            if value.isdigit() and int(value) > 0:
                found[name[3:]] = int(value)
            else:
                warnings.append(f"SlurmctldParameters: {name}={value!r} is not a whole number "
                                f"above 0; using the default")
    return RateLimitSettings(enabled=enabled, **found), warnings


def from_settings(settings: tuple[tuple[str, str], ...]) -> RateLimitSettings:
    """From a ClusterConfig's `settings` (its global keys as written)."""
    for name, value in settings:
        if name.lower() == "slurmctldparameters":
            return rate_limit_settings(value)[0]
    return RateLimitSettings()


def read_cache_ms(settings: tuple[tuple[str, str], ...]) -> int:
    """SlurmctldParameters=read_cache_ms=N (Ranch's own): listings may be answered from a body
    built up to N ms ago (ctld/rpc/readcache.py); 0, the default, or a bad value: never."""
    return _ms_option(settings, "read_cache_ms")


def standby_read_ms(settings: tuple[tuple[str, str], ...]) -> int:
    """SlurmctldParameters=standby_read_ms=N (Ranch's own, issue 47): a standby answers the
    listings from its copy of the state while that copy is proven at most N ms old
    (ctld/pair/standbyreads.py), and the commands ask the standbys for them first; 0, the
    default, or a bad value: standbys answer only "not the controller"."""
    return _ms_option(settings, "standby_read_ms")


def _ms_option(settings: tuple[tuple[str, str], ...], wanted: str) -> int:
    for name, value in settings:
        if name.lower() != "slurmctldparameters":
            continue
        for option in value.split(","):
            key, _, number = (s.strip() for s in option.partition("="))
            if key.lower() == wanted and number.isdigit():
                return int(number)
    return 0
