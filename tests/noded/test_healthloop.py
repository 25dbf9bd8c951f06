"""rnoded's health-check schedule under trio's MockClock: every HealthCheckInterval from the
first run, and recomputed at once when new settings arrive mid-interval."""

from __future__ import annotations

import attrs
import trio

from ranch.noded.healthloop import HealthCheck
from ranch.protocol.messages import HealthReport, NodeSettings

SETTINGS = NodeSettings(cluster_name="c", heartbeat_interval=1.0, slurmd_timeout=10.0,
                        message_timeout=5.0, health_check_program="/bin/true",
                        health_check_interval=10.0, health_check_timeout=5.0,
                        health_check_node_state=("ANY",))


async def test_runs_every_interval_and_reschedules_on_new_settings(autojump_clock) -> None:
    settings = [SETTINGS]
    runs: list[float] = []

    async def runner(program: str, **_: object) -> HealthReport:
        # the program's run itself is not under test here: its time under a virtual clock is
        runs.append(trio.current_time())
        return HealthReport("ok")

    check = HealthCheck("n1", settings=lambda: settings[0], node_state=lambda: "IDLE",
                        on_verdict=lambda: None, runner=runner)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(check.loop)
        await trio.sleep(25)
        assert runs == [0, 10, 20]  # the first run at once, then one an interval
        settings[0] = attrs.evolve(SETTINGS, health_check_interval=100.0)
        check.settings_changed()  # 5 s before the run due at 30: that slot is given up
        await trio.sleep(210)
        nursery.cancel_scope.cancel()
    assert runs == [0, 10, 20, 125, 225]
