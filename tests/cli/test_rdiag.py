"""rdiag (sdiag): the two blocks' text, line for line, from figures as rctld sends them (golden
files: once cycles ran, and before any, when sdiag leaves out the means), and `--json`."""

from __future__ import annotations

import orjson
import pytest

from ranch.cli import rdiag
from ranch.ctld.jobs.schedstats import SchedStats
from tests.cli.test_golden import check_golden, mask


def figures(cycles: bool) -> dict:
    now = [1_764_000_000.0]
    stats = SchedStats(lambda: now[0])
    if cycles:
        for us, depth, queue in ((310, 2, 4), (1250, 5, 6), (95, 1, 1)):
            stats.main_cycle(us, depth, queue)
        stats.backfill_cycle(now[0] + 30, 4200, 6, 4, 6, 2)
        stats.backfill_cycle(now[0] + 60, 1800, 3, 3, 4, 1)
    now[0] += 600  # ten minutes since rctld started: sdiag adds "Cycles per minute"
    return stats.record()


@pytest.mark.parametrize(("name", "cycles"), [("rdiag.txt", True), ("rdiag_none.txt", False)])
def test_the_blocks_read_as_sdiag_prints_them(name: str, cycles: bool) -> None:
    check_golden(name, mask(rdiag.render(figures(cycles))))


def test_the_figures_behind_the_lines() -> None:
    s = figures(True)
    assert (s["schedule_cycle_total"], s["schedule_cycle_last"], s["schedule_cycle_max"],
            s["schedule_cycle_mean"], s["schedule_cycle_mean_depth"],
            s["schedule_queue_length"], s["schedule_cycle_per_minute"]) == (3, 95, 1250, 551,
                                                                           2, 1, 0)
    assert (s["bf_cycle_counter"], s["bf_backfilled_jobs"], s["bf_cycle_last"],
            s["bf_cycle_max"], s["bf_cycle_mean"], s["bf_last_depth"], s["bf_last_depth_try"],
            s["bf_depth_mean"], s["bf_depth_mean_try"], s["bf_queue_len"],
            s["bf_queue_len_mean"]) == (2, 3, 1800, 4200, 3000, 3, 3, 4, 3, 4, 5)
    assert s["bf_when_last_cycle"] == 1_764_000_060


def test_json_and_refusals(monkeypatch, capsys) -> None:
    from ranch.cli import controller

    sent: list[str] = []

    def answer(target, type_name, body=None, *, want):
        sent.append(type_name)
        return {"stats": figures(True)}

    monkeypatch.setattr(controller, "request", answer)
    assert rdiag.main(["--json", "--server", "127.0.0.1:9"]) == 0
    assert orjson.loads(capsys.readouterr().out) == {"statistics": figures(True)}
    assert sent == ["GetDiag"]
    assert rdiag.main(["-r", "--server", "127.0.0.1:9"]) == 1
    assert "does not reset" in capsys.readouterr().err
