"""A small seeded all-pairs generator: rows that together hold every pair of levels of any two
factors at least once, far fewer than the full product (greedy, as AETG/PICT build them: each
new row the candidate, among a few seeded random ones, that covers most pairs not yet held).

The seed is fixed for CI (DEFAULT_SEED); RANCH_COMBO_SEED=N picks another, and
RANCH_COMBO_SEED=fresh a new random one each run (printed in every failure), so that runs keep
meeting combinations CI has not tried."""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Mapping, Sequence

DEFAULT_SEED = 2205
CANDIDATES = 30  # random rows weighed for each row kept


def seed() -> int:
    text = os.environ.get("RANCH_COMBO_SEED", "")
    if text == "fresh":
        return random.SystemRandom().randrange(1, 2**31)
    return int(text) if text else DEFAULT_SEED


def all_pairs(factors: Mapping[str, Sequence[object]], rng: random.Random
              ) -> list[dict[str, int]]:
    """Rows as {factor: level index}; every pair of levels of two factors is in some row."""
    names = list(factors)
    sizes = [len(factors[n]) for n in names]
    missing = {(a, i, b, j) for a, b in itertools.combinations(range(len(names)), 2)
               for i in range(sizes[a]) for j in range(sizes[b])}
    rows: list[tuple[int, ...]] = []

    def gain(row: tuple[int, ...]) -> int:
        return sum((a, row[a], b, row[b]) in missing
                   for a, b in itertools.combinations(range(len(names)), 2))

    while missing:
        # start from a pair still missing, so every row covers at least one
        a, i, b, j = min(missing)
        best: tuple[int, ...] | None = None
        for _ in range(CANDIDATES):
            row = [rng.randrange(s) for s in sizes]
            row[a], row[b] = i, j
            if best is None or gain(tuple(row)) > gain(best):
                best = tuple(row)
        assert best is not None
        rows.append(best)
        missing -= {(x, best[x], y, best[y])
                    for x, y in itertools.combinations(range(len(names)), 2)}
    return [dict(zip(names, row, strict=True)) for row in rows]
