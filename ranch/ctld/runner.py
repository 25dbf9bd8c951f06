"""Where the controller's background work runs: the daemon's nursery, once it is open."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio


class Runner:
    """Starts tasks (power and mail programs, pushes to nodes) in the daemon's nursery; what
    is asked for before that nursery opens starts as soon as it does."""

    def __init__(self) -> None:
        self._nursery: trio.Nursery | None = None
        self._early: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def open(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        early, self._early = self._early, []
        for fn, args in early:
            nursery.start_soon(fn, *args)

    def start_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._nursery is None:
            self._early.append((fn, args))
        else:
            self._nursery.start_soon(fn, *args)
