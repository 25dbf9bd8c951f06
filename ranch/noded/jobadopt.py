"""A job's record read back after a restart: what the previous rnoded left of the run (its
recorded end, or the run with the pids of its supervisor, or a launch it stopped in the middle of).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import attrs
import trio

from ranch.noded import jobstore
from ranch.protocol.messages import JobEnd, JobSpec

log = logging.getLogger("rnoded.jobs")


@attrs.frozen
class Recorded:
    """A run the record holds no end of: its spec, the ending begun (a kill under way) and the
    supervisor's pids (None: it never wrote them)."""

    spec: JobSpec
    ending: str
    silent: bool
    pids: dict | None


async def read_record(path: Path, launch_timeout: float) -> JobEnd | Recorded | None:
    """The run's recorded end, or the run to adopt; None when there is nothing to adopt (an
    unreadable record, or a launch given back: the record is gone then)."""
    end = await trio.to_thread.run_sync(jobstore.load_end, path)
    if end is not None:
        return end
    spec = await trio.to_thread.run_sync(jobstore.load_spec, path)
    if spec is None:
        log.warning("dropping unreadable job record %s", path)
        await trio.to_thread.run_sync(jobstore.remove, path)
        return None
    ending, silent = await trio.to_thread.run_sync(jobstore.load_ending, path)
    pids = await trio.to_thread.run_sync(jobstore.read_json, path / "pids.json")
    if pids is None:
        pids = await _pids_of_interrupted_launch(spec, path, launch_timeout)
        if pids is False:
            return None
    return Recorded(spec, ending, silent, pids)


async def _pids_of_interrupted_launch(spec: JobSpec, path: Path, launch_timeout: float
                                      ) -> dict | Literal[False] | None:
    """A record without pids.json: the previous rnoded stopped while launching it. False
    when its script never started (the claim was still free; now it never will): the
    record goes, the run is not reported, and the controller sends it again or requeues
    it, never taking a run that did not happen for a FAILED one. Otherwise the shim has it:
    its pids once it writes them (None if it does not within the launch timeout)."""
    if await trio.to_thread.run_sync(jobstore.claim, path):
        log.warning("job %d run %d: rnoded stopped before its script started; "
                    "the run is given back", spec.job_id, spec.restarts)
        await trio.to_thread.run_sync(jobstore.remove, path)
        return False
    with trio.move_on_after(launch_timeout):
        while True:
            pids = await trio.to_thread.run_sync(jobstore.read_json, path / "pids.json")
            status = await trio.to_thread.run_sync(jobstore.read_json,
                                                   path / "status.json")
            if pids is not None or status is not None:
                return pids
            await trio.sleep(0.05)
    return None
