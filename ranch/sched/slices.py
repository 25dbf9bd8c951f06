"""Work written as a generator of slices (it yields where a caller may let others run, and
returns its result): run to its end at once, for a caller that cannot yield."""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")


def to_end(steps: Generator[None, None, T]) -> T:
    """`steps` run without pausing; what it returns."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
