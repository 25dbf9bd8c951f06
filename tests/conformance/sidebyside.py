"""One scenario script run on Slurm and on Ranch at the same time, in a thread each (a
scenario that waits for a job's end waits once, not twice), what each saw returned by system;
a failure on either side is raised with both sides' log tails."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from typing import Any


def run_both(slurm: Any, ranch: Any, script: Callable[[Any], Any],
             timeout: float = 400) -> dict[str, Any]:
    """{"slurm": script(slurm), "ranch": script(ranch)}, both run at once."""
    out: dict[str, Any] = {}
    errors: list[BaseException] = []
    logs: dict[str, str] = {}

    def run(name: str, cluster: Any) -> None:
        try:
            out[name] = script(cluster)
        except BaseException as exc:  # reported below, with its logs
            errors.append(exc)
            logs[name] = cluster.log_tail() + "".join(
                traceback.format_exception(exc))[-1500:]

    threads = [threading.Thread(target=run, args=("slurm", slurm)),
               threading.Thread(target=run, args=("ranch", ranch))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    if errors:
        raise AssertionError(f"{errors[0]!r}\n" + "\n".join(
            text[-3000:] for text in logs.values()))
    return out


def same_steps(sessions: dict[str, list[tuple[str, Any]]]) -> None:
    """Both sides saw the same steps, each with the same figures (a script that returns
    (step, what it saw) pairs)."""
    slurm, ranch = sessions["slurm"], sessions["ranch"]
    assert [s for s, _ in ranch] == [s for s, _ in slurm]
    for (step, want), (_, got) in zip(slurm, ranch, strict=True):
        assert got == want, f"{step}: Slurm {want}, Ranch {got}"
