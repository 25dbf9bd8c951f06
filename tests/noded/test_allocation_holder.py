"""An allocation on the node (issue 20: ralloc, rrun outside a job): a job without a script
holds its resources on every node, the batch host too, with no output file of its own; its
end when released, cancelled or timed out is 0:0, as Slurm's (no batch step takes a signal)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio

from ranch.noded.jobs import JobRunner

from .test_jobs import ended, spec


@pytest.fixture
async def runner(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[JobRunner]:
    r = JobRunner(str(tmp_path / "spool"), "n1")
    await nursery.start(r.run)
    yield r


async def test_the_batch_host_holds_an_allocation_and_its_end_is_0_0(
        runner: JobRunner, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    # no script: n1, the batch host, holds the allocation like its other node
    job = attrs.evolve(spec(work, "", 51, nodelist="n1,n2", num_nodes=2), script="")
    await runner.launch(job)
    assert runner.runs() == ((51, 0),)
    assert await runner.kill(51, 0, "cancelled")
    end = await ended(runner, 51)
    assert (end.state, end.exit_code, end.signal) == ("CANCELLED", 0, 0)
    assert list(work.iterdir()) == []  # no slurm-51.out, no "CANCELLED AT" line anywhere


async def test_an_allocation_out_of_time_ends_timeout_0_0(runner: JobRunner,
                                                          tmp_path: Path) -> None:
    job = attrs.evolve(spec(tmp_path, "", 52, time_limit=0.3), script="")
    await runner.launch(job)
    end = await ended(runner, 52)
    assert (end.state, end.exit_code, end.signal) == ("TIMEOUT", 0, 0)
