"""Config-driven choices the transition table consults (ReturnToService and friends)."""

from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class Policy:
    # 0: a DOWN node stays DOWN until an admin acts; 1: it returns on a valid registration if
    # it was DOWN only for "Not responding" (or "rnoded shut down"); 2: any DOWN node returns.
    return_to_service: int = attrs.field(default=0, validator=attrs.validators.in_((0, 1, 2)))
    # A HealthCheckProgram is set: a node back from a reboot or a power-save resume returns to
    # service only once its check on the new boot passed (issue 33).
    health_gate: bool = False
    # RebootUnhealthyMax: boots in a row that end unhealthy before the node is FAIL (0: never).
    unhealthy_max: int = 2

    @classmethod
    def from_timeouts(cls, timeouts: object) -> Policy:
        """Build from conf's Timeouts (duck-typed: statemachine imports nothing of Ranch)."""
        return cls(return_to_service=int(getattr(timeouts, "return_to_service", 0)))


DEFAULT_POLICY = Policy()
