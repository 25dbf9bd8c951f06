"""HealthCheck: rnoded's runs of HealthCheckProgram on HealthCheckInterval's schedule, verdicts."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

import trio

from ranch.protocol.messages import HealthReport, NodeSettings

log = logging.getLogger("rnoded")

HealthRunner = Callable[..., Awaitable[HealthReport]]


def _default_runner() -> HealthRunner:
    from ranch.healthcheck.runner import run_health_program

    return run_health_program


def default_eligible(state: str, setting: tuple[str, ...]) -> bool:
    from ranch.healthcheck.schedule import eligible

    return eligible(state, setting)


def default_cycle_delay(name: str, interval: float) -> float:
    from ranch.healthcheck.schedule import cycle_delay

    return cycle_delay(name, interval)


def default_is_healthy(state: str) -> bool:
    from ranch.healthcheck.schedule import is_healthy

    return is_healthy(state)


class HealthCheck:
    """The node's health check. `settings` and `node_state` read the session's current ones;
    `on_verdict` is called when the verdict changes (the session sends a beat at once)."""

    def __init__(
        self,
        name: str,
        *,
        settings: Callable[[], NodeSettings | None],
        node_state: Callable[[], str],
        on_verdict: Callable[[], None],
        runner: HealthRunner | None = None,
        eligible: Callable[[str, tuple[str, ...]], bool] = default_eligible,
        cycle_delay: Callable[[str, float], float] = default_cycle_delay,
        is_healthy: Callable[[str], bool] = default_is_healthy,
    ) -> None:
        self.name = name
        self._settings = settings
        self._node_state = node_state
        self._on_verdict = on_verdict
        self._runner = runner
        self._eligible = eligible
        self._cycle_delay = cycle_delay
        self._is_healthy = is_healthy
        self.health: HealthReport | None = None  # the latest verdict
        self.unsent: HealthReport | None = None  # the latest verdict no heartbeat carried yet
        self.ran = False  # the first run (which the loop makes unless registration did) is over
        self._settings_event = trio.Event()

    def program(self) -> str | None:
        settings = self._settings()
        return settings.health_check_program if settings else None

    def settings_changed(self) -> None:
        """New settings were applied: the loop recomputes its schedule."""
        changed, self._settings_event = self._settings_event, trio.Event()
        changed.set()

    async def loop(self) -> None:
        next_due: float | None = None
        while True:
            changed = self._settings_event
            settings = self._settings()
            if settings is None or not settings.health_check_program:
                await changed.wait()
                continue
            if not self.ran:
                await self.run()
                continue
            states = settings.health_check_node_state
            interval = settings.health_check_interval
            if interval <= 0 or {"START_ONLY", "REBOOT_ONLY"} & {v.upper() for v in states}:
                await changed.wait()
                next_due = None
                continue
            now = trio.current_time()
            if next_due is None:
                if "CYCLE" in states:  # this node's own slot inside the interval
                    offset = self._cycle_delay(self.name, interval)
                    next_due = now - now % interval + offset
                    if next_due <= now:
                        next_due += interval
                else:
                    next_due = now + interval
            elif next_due <= now:  # the last run overran its slot: skip the missed ones
                next_due += math.ceil((now - next_due) / interval + 1e-9) * interval
            with trio.move_on_at(next_due) as slot:
                await changed.wait()
            if not slot.cancelled_caught:  # settings changed: recompute the schedule
                next_due = None
                continue
            next_due += interval
            try:
                due = self._eligible(self._node_state(), states)
            except Exception:  # a broken schedule must not stop heartbeats
                log.exception("cannot decide whether the health check is due; running it")
                due = True
            if due:
                await self.run()

    def _healthy_now(self) -> bool | None:
        """The controller's view (down/drained/failed = no); before it spoke, our last verdict."""
        node_state = self._node_state()
        if node_state != "UNKNOWN":
            try:
                return self._is_healthy(node_state)
            except Exception:
                log.exception("cannot judge node state %r", node_state)
        return None if self.health is None else self.health.verdict == "ok"

    def first_run_is_registrations(self) -> None:
        """The registration runs the first check itself (before the config that wakes this
        loop is applied): the loop does not run one too."""
        self.ran = True

    def delivered(self, report: HealthReport | None) -> None:
        """A heartbeat carrying `report` was answered: it is no longer unsent (unless a newer
        verdict came meanwhile)."""
        if self.unsent is report:
            self.unsent = None

    async def run(self) -> None:
        settings = self._settings()
        if settings is None or not settings.health_check_program:
            return
        previous = self.health
        try:
            runner = self._runner or _default_runner()
            report = await runner(
                settings.health_check_program,
                node_name=self.name,
                node_state=self._node_state(),
                is_healthy=self._healthy_now(),
                timeout=settings.health_check_timeout,
            )
        except Exception:
            log.exception("health check program %s could not be run", settings.health_check_program)
            return
        finally:
            self.ran = True
        self.health = report
        self.unsent = report
        if report.verdict != "ok":
            log.warning("health check: %s %s", report.verdict, report.message)
        if previous is None or previous.verdict != report.verdict:
            self._on_verdict()  # drains and recoveries should not wait a whole interval
