"""Events applied per second by ranch.statemachine.apply on one core (goal: > 200,000/s)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranch.statemachine import events as ev
from ranch.statemachine.model import initial_state
from ranch.statemachine.policy import Policy
from ranch.statemachine.table import apply

NODES = 50_000


def _rate(label: str, states: list, make_event, rounds: int, policy: Policy) -> float:
    best = 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = [apply(s, make_event(i), policy)[0] for i, s in enumerate(states)]
        dt = time.perf_counter() - t0
        best = max(best, len(states) / dt)
    print(f"{label:<44} {best:>12,.0f} events/s   ({len(out):,} nodes, best of {rounds})")
    return best


def main() -> None:
    policy = Policy(return_to_service=1)
    fresh = [initial_state(f"n{i:05d}", 64) for i in range(NODES)]
    up = [apply(s, ev.Registered(1.0), policy)[0] for s in fresh]
    beat = ev.HeartbeatReceived(2.0)
    hot = _rate("heartbeat received, node up (hot path)", up, lambda i: beat, 5, policy)
    _rate("registration, UNKNOWN -> IDLE", fresh, lambda i: ev.Registered(1.0), 3, policy)
    _rate("allocation change, IDLE -> MIXED", up, lambda i: ev.AllocationChanged(3.0, 8), 3,
          policy)
    missed = ev.HeartbeatMissed(4.0)
    _rate("heartbeat missed, IDLE -> idle*", up, lambda i: missed, 3, policy)
    nr = [apply(s, missed, policy)[0] for s in up]
    _rate("heartbeat received, idle* -> idle", nr, lambda i: beat, 3, policy)
    tmo = ev.ResponseTimeout(5.0)
    _rate("response timeout, idle* -> down*", nr, lambda i: tmo, 3, policy)
    print(f"\nheadline: {hot:,.0f} heartbeats/s; a {NODES:,}-node heartbeat storm costs "
          f"{NODES / hot * 1000:.0f} ms")


if __name__ == "__main__":
    main()
