"""A partition's configured options (snapshot `options`, keys as in slurm.conf) shown the way
scontrol and sinfo 22.05 show them: configured values, Slurm's defaults where unset."""

from __future__ import annotations

_TRUE = frozenset({"YES", "TRUE", "1", "Y"})


class PartOptions:
    """Read-only view of one partition record's `options`, with Slurm's display defaults."""

    __slots__ = ("_opts",)

    def __init__(self, part: dict) -> None:
        self._opts: dict[str, str] = part.get("options") or {}

    def raw(self, key: str) -> str | None:
        value = self._opts.get(key)
        return None if value is None else value.strip()

    def text(self, key: str, default: str) -> str:
        value = self.raw(key)
        return value if value else default

    def yes_no(self, key: str) -> str:
        value = self.raw(key)
        return "YES" if value is not None and value.upper() in _TRUE else "NO"

    def number(self, key: str, default: str) -> str:
        """A count or limit: as written, UNLIMITED/INFINITE as UNLIMITED."""
        value = self.raw(key)
        if not value:
            return default
        return "UNLIMITED" if value.upper() in ("UNLIMITED", "INFINITE", "-1") else value

    def priority(self, key: str) -> str:
        # `Priority=` is the old spelling that sets both PriorityJobFactor and PriorityTier.
        return self.text(key, self.text("Priority", "1"))

    def oversubscribe(self) -> str:
        """NO, EXCLUSIVE, YES:N or FORCE:N (a bare YES/FORCE means 4 jobs per resource)."""
        value = self.raw("OverSubscribe") or self.raw("Shared")
        if not value:
            return "NO"
        word, _, count = value.upper().partition(":")
        if word in ("YES", "FORCE"):
            return f"{word}:{count or '4'}"
        return word

    def over_time_limit(self) -> str:
        value = self.raw("OverTimeLimit")
        if not value:
            return "NONE"
        return "UNLIMITED" if value.upper() in ("UNLIMITED", "INFINITE", "-1") else value

    def access(self, allow: str, deny: str) -> str:
        """`AllowX=...`, or `DenyX=...` when only the deny list is set."""
        allowed, denied = self.raw(allow), self.raw(deny)
        if denied and not allowed:
            return f"{deny}={denied}"
        return f"{allow}={allowed or 'ALL'}"

    def mem(self, per_cpu: str, per_node: str) -> str:
        """`DefMemPerCPU=N` when set per CPU, else `DefMemPerNode=N|UNLIMITED` (same for Max)."""
        cpu = self.raw(per_cpu)
        if cpu:
            return f"{per_cpu}={cpu}"
        return f"{per_node}={self.number(per_node, 'UNLIMITED')}"

    def job_defaults(self) -> str:
        items = [f"{k}={self.raw(k)}" for k in ("DefCpuPerGPU", "DefMemPerGPU") if self.raw(k)]
        return ",".join(items) or "(null)"

    def job_size(self) -> str:
        """sinfo's JOB_SIZE: `MIN-MAX` nodes, `1-infinite` when unlimited."""
        low = self.raw("MinNodes")
        lo = max(int(low), 1) if low and low.isdigit() else 1
        high = self.number("MaxNodes", "UNLIMITED")
        if high == "UNLIMITED" or not high.isdigit():
            return f"{lo}-infinite"
        return str(lo) if int(high) == lo else f"{lo}-{high}"

    def groups(self) -> str:
        """sinfo's GROUPS: the AllowGroups list, `all` when unrestricted."""
        value = self.raw("AllowGroups")
        return "all" if not value or value.upper() == "ALL" else value
