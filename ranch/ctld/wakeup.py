"""A wake-up call from an owner that has work to the loop that does it (sets coalesce)."""

from __future__ import annotations

import trio


class Wakeup:
    """A trio.Event that arms itself again when a waiter wakes, so that its owner hands out
    `set` once, at construction, and never swaps the event under anyone."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event = trio.Event()  # no checkpoint since it fired: no set is lost
