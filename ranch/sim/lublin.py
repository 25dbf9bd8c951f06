"""A seeded synthetic workload after Lublin and Feitelson's model of rigid parallel jobs.

Source of the model and its parameters: U. Lublin and D. G. Feitelson, "The workload on
parallel supercomputers: modeling the characteristics of rigid jobs", Journal of Parallel and
Distributed Computing 63(11):1105-1122, 2003, and its implementation distributed by the
Parallel Workloads Archive (m_lublin99.c, cs.huji.ac.il/labs/parallel/workload/models.html),
whose constants for the all-jobs fit are the defaults of `Model` below:

- size: serial with probability SERIAL_PROB (0.244); else log2(size) is uniform on
  [ULOW, UMED] with probability UPROB (0.86) and on [UMED, UHI] otherwise (the "two-stage
  uniform"; ULOW 0.8, UHI = log2(machine size), UMED = UHI - 2.5 as the paper sets it),
  rounded to a power of two with probability POW2_PROB (0.576);
- runtime: log(runtime, seconds) is hyper-gamma, Gamma(A1=4.2, B1=0.94) with probability
  p = PA * size + PB (PA=-0.0054, PB=0.78: larger jobs run longer), else Gamma(A2=312, B2=0.03);
- arrivals: log(interarrival, seconds) is Gamma(AARR=10.23, BARR=0.4871) in "busy" time, and
  the day's cycle spreads it over the hours by the Gamma(ANUM=8.17, BNUM=0.6243) density of
  the hours since 08:00 (48 half-hour weights, as the model's). A floor of FLOOR of the
  peak's weight at night is ours: the density alone lets nights go empty, which the
  Archive's logs do not.

On top of the model, as ../shared/sched-reference.md section 4 describes: U users in A
accounts with Zipf-like activity (user k submits with weight 1/k), time limits of runtime x
U[1, 10] rounded up to the next of LIMIT_STEPS (15 min, 1 h, 4 h, 1 day; "exact": the runtime
rounded up to a minute), and `scale` to compress a trace's times for a test's budget.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence

import attrs

from ranch.sim.trace import TraceJob

LIMIT_STEPS = (15, 60, 240, 1440)  # minutes
FLOOR = 0.15
DAY = 86400
BUCKET = 1800  # the cycle's half hours
CYCLE_START = 8  # hour of day the arrival density's origin sits at


@attrs.frozen
class Model:
    """The model's parameters (m_lublin99.c's all-jobs constants)."""

    serial_prob: float = 0.244
    pow2_prob: float = 0.576
    ulow: float = 0.8
    umed_below_top: float = 2.5  # UMED = UHI - 2.5
    uprob: float = 0.86
    a1: float = 4.2
    b1: float = 0.94
    a2: float = 312.0
    b2: float = 0.03
    pa: float = -0.0054
    pb: float = 0.78
    aarr: float = 10.23
    barr: float = 0.4871
    anum: float = 8.1737
    bnum: float = 0.6243


def _gamma_pdf(x: float, a: float, b: float) -> float:
    if x <= 0:
        return 0.0
    return math.exp((a - 1) * math.log(x) - x / b - math.lgamma(a) - a * math.log(b))


def day_weights(model: Model) -> list[float]:
    """The arrival rate of each half hour of the day, relative to the day's mean (mean 1)."""
    raw = [_gamma_pdf(((i + 0.5) / 2 - CYCLE_START) % 24, model.anum, model.bnum)
           for i in range(DAY // BUCKET)]
    peak = max(raw)
    w = [max(r, FLOOR * peak) for r in raw]
    mean = sum(w) / len(w)
    return [x / mean for x in w]


class Generator:
    """Jobs drawn from the model with one seeded random stream: the same arguments give the
    same jobs."""

    def __init__(self, seed: int, max_procs: int, model: Model = Model()) -> None:
        self.rng = random.Random(seed)
        self.model = model
        self.max_procs = max(1, max_procs)
        self.weights = day_weights(model)

    def size(self) -> int:
        m, rng = self.model, self.rng
        uhi = math.log2(self.max_procs)
        if uhi <= 0 or rng.random() < m.serial_prob:
            return 1
        ulow = min(m.ulow, uhi)
        umed = max(ulow, uhi - m.umed_below_top)
        u = rng.uniform(ulow, umed) if rng.random() < m.uprob else rng.uniform(umed, uhi)
        size = 2 ** round(u) if rng.random() < m.pow2_prob else round(2 ** u)
        return max(2, min(self.max_procs, int(size)))

    def runtime(self, size: int) -> float:
        m, rng = self.model, self.rng
        p = min(1.0, max(0.0, m.pa * size + m.pb))
        x = rng.gammavariate(m.a1, m.b1) if rng.random() < p else rng.gammavariate(m.a2, m.b2)
        return max(1.0, math.exp(x))

    def gap(self, t: float) -> float:
        """The time from an arrival at `t` to the next: the model's busy-time gap spread over
        the day's cycle (a gap is longer where the rate is lower)."""
        left = math.exp(self.rng.gammavariate(self.model.aarr, self.model.barr))
        now = t
        while True:
            rate = self.weights[int(now % DAY) // BUCKET]
            edge = (math.floor(now / BUCKET) + 1) * BUCKET
            room = (edge - now) * rate
            if room >= left:
                return now + left / rate - t
            left -= room
            now = edge


def limit_of(runtime: float, rng: random.Random, exact: bool,
             steps: Sequence[int] = LIMIT_STEPS) -> int:
    """A time limit (minutes) a user would ask for a job of this runtime."""
    if exact:
        return max(1, math.ceil(runtime / 60))
    want = runtime * rng.uniform(1, 10) / 60
    if not steps:  # no rounding: the estimate as the user made it, in whole minutes
        return max(1, math.ceil(want))
    i = bisect.bisect_left(steps, want)
    if i < len(steps):
        return steps[i]
    return math.ceil(want / steps[-1]) * steps[-1]


def generate(count: int, *, seed: int, max_procs: int, users: int = 8, accounts: int = 3,
             scale: float = 1.0, exact: bool = False, steps: Sequence[int] = LIMIT_STEPS,
             start_hour: float = 8.0, model: Model = Model()) -> list[TraceJob]:
    """`count` jobs for a machine of `max_procs` processors; times multiplied by `scale`
    (runtimes at least a second, limits at least a minute, taken after scaling)."""
    gen = Generator(seed, max_procs, model)
    rng = gen.rng
    zipf = [1 / k for k in range(1, users + 1)]
    t = start_hour * 3600
    origin = t
    out = []
    for i in range(count):
        if i:
            t += gen.gap(t)
        size = gen.size()
        run = gen.runtime(size)
        user = rng.choices(range(users), weights=zipf)[0]
        runtime = max(1.0, round(run * scale))
        out.append(TraceJob(
            id=i + 1, submit=round((t - origin) * scale, 3), runtime=runtime,
            time_limit=limit_of(runtime, rng, exact, steps), procs=size, uid=1000 + user,
            account=f"acct{user % accounts}", user=f"user{user}"))
    return out
