"""A job against its partitions' limits at submission: which partitions it may wait in, or
slurmctld's refusal under EnforcePartLimits=ALL/ANY (the limits are ranch/sched/limits.py).

With EnforcePartLimits=NO (the default) a job over a limit is queued and waits with the limit's
reason; ALL refuses it if any partition it names is exceeded, ANY if every one is. A job naming
several partitions (`-p debug,main`) runs in the first of them that can start it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


class Sizes:
    """Each partition's (node count, CPUs), kept while its members are the same object (the
    pass and the submission checks ask once a job: summing 10,000 nodes each time would make
    every pass O(jobs x nodes))."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[object, tuple[int, int]]] = {}

    def of(self, name: str, members: object, node_cpus: Iterable[int]) -> tuple[int, int]:
        hit = self._kept.get(name)
        if hit is not None and hit[0] is members:
            return hit[1]
        cpus = list(node_cpus)
        got = (len(cpus), sum(cpus))
        if len(self._kept) >= 256:
            self._kept.clear()
        self._kept[name] = (members, got)
        return got


def choose(results: Sequence[Any], enforce: str) -> list[Any] | Any:
    """From each named partition's check (a Checked, with `over` set where it exceeds a
    limit, or an m.Error), the partitions the job may wait in, in order; or the refusal."""
    fits = [r for r in results if not _refused(r) and not r.over]
    exceeding = [r for r in results if not _refused(r) and r.over]
    errors = [r for r in results if _refused(r)]
    if enforce == "ALL" and exceeding:
        return _limit_error(exceeding[0])
    if fits:  # NO: it may wait in those it exceeds too (measured: it runs where it fits)
        return fits if enforce == "ANY" else [r for r in results if not _refused(r)]
    if errors:  # a partition that can never hold it outweighs one it only exceeds
        return errors[0]
    if enforce == "ANY":
        return _limit_error(exceeding[0])
    return exceeding


def _refused(result: Any) -> bool:
    return not hasattr(result, "over")


def _limit_error(checked: Any) -> Any:
    from ranch.protocol import messages as m

    return m.Error("bad_request", checked.over[1])
