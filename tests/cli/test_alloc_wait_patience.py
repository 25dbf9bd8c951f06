"""A wait for resources across the controller's absence (cli/allocation.py `look`): it asks again
until the controller answers, and past its patience says so and exits 1. The integration test
(tests/integration/test_alloc_wait_restart_e2e.py) restarts a real rctld; this one drives the
clock past the bound, which a real wait would take minutes to reach."""

from __future__ import annotations

import pytest

from ranch.cli import allocation
from ranch.cli.allocation import Allocation
from ranch.cli.controller import Target, Unreachable


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def waiting(monkeypatch: pytest.MonkeyPatch, answers: list) -> tuple[Allocation, Clock]:
    clock = Clock()
    alloc = Allocation(Target("127.0.0.1", 9, "/nonexistent", "test"), "ralloc", salloc=True)
    alloc.job_id = 7

    def fetch() -> dict:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def sleep(seconds: float) -> None:
        assert 0 < seconds <= allocation.MAX_AWAY_PAUSE
        clock.now += seconds

    monkeypatch.setattr(alloc, "fetch", fetch)
    monkeypatch.setattr(allocation.time, "sleep", sleep)
    return alloc, clock


def test_the_wait_goes_on_once_the_controller_answers_again(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    away = Unreachable("cannot reach the controller at 127.0.0.1:9 (from test): refused")
    alloc, clock = waiting(monkeypatch, [away, away, away, {"job_id": 7, "state": "PENDING"}])
    assert alloc.look(clock) == {"job_id": 7, "state": "PENDING"}
    assert capsys.readouterr().err.splitlines() == [
        "ralloc: cannot reach the controller at 127.0.0.1:9 (from test): refused; still "
        "waiting for job 7 (for up to 120 s)",
        "ralloc: controller reachable again; job 7 still waits"]


def test_past_its_patience_the_wait_says_so_and_exits_1(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    away = Unreachable("cannot reach the controller at 127.0.0.1:9 (from test): refused")
    alloc, clock = waiting(monkeypatch, [away] * 1000)
    alloc.wait_patience = 30.0
    with pytest.raises(SystemExit) as exc:
        alloc.look(clock)
    assert exc.value.code == 1
    assert 30.0 <= clock.now <= 30.0 + allocation.MAX_AWAY_PAUSE
    assert capsys.readouterr().err.splitlines()[-1] == (
        "ralloc: error: Unable to allocate resources: the controller could not be reached for "
        "30 s while job 7 waited; giving up")
