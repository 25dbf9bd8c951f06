"""rctld SIGKILLed again and again at random moments while submissions, completions, drains and
cancels flow: afterwards every acknowledged job and admin change is there, no job ran twice,
and every job that finished shows one end.

Durable before acknowledged, checked from outside: a reply the test received is a promise, and
the state rctld reads back after each SIGKILL must keep it.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from pathlib import Path

from ranch.protocol import messages as m
from ranch.protocol.client import ControllerUnreachable
from ranch.protocol.errors import ProtocolError

from .test_jobs_e2e import jobs_cluster, start

CRASHES = 10
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def _submit_msg(workdir: Path, seconds: float) -> m.SubmitJob:
    script = ("#!/bin/sh\necho $SLURM_JOB_ID ${SLURM_RESTART_COUNT:-0} >> runs.log\n"
              f"sleep {seconds}\n")
    return m.SubmitJob(script=script, user="crash", uid=os.getuid(), gid=os.getgid(),
                       workdir=str(workdir), env=(("PATH", os.environ.get("PATH", "")),),
                       name="crash")


class Workload:
    """Submits, cancels and drains in a loop; keeps what rctld acknowledged."""

    def __init__(self, c, rng: random.Random) -> None:
        self.c = c
        self.rng = rng
        self.stop = threading.Event()
        self.jobs: list[int] = []  # acknowledged submissions
        self.long: list[int] = []  # of those, the long sleepers not yet cancelled
        self.long_all: set[int] = set()
        self.cancelled: list[int] = []  # acknowledged cancels
        self.admin: list[tuple[str, bool]] = []  # (state, acknowledged) of each n3 update, in order
        self.errors: list[str] = []

    def _ask(self, msg):
        try:
            return self.c.request(msg, timeout=3)
        except (ControllerUnreachable, ProtocolError, OSError):
            return None  # rctld is down or died mid-request: nothing was promised

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            long = i % 5 == 0
            reply = self._ask(_submit_msg(self.c.dir, 30 if long else 0.2))
            if isinstance(reply, m.SubmitReply):
                self.jobs.append(reply.job_id)
                if long:
                    self.long.append(reply.job_id)
                    self.long_all.add(reply.job_id)
            elif isinstance(reply, m.Error):
                self.errors.append(f"submit: {reply.message}")
            if self.long and i % 3 == 0:
                target = self.long.pop(0)
                r = self._ask(m.CancelJobs(job_ids=(target,), user="crash", uid=os.getuid()))
                if isinstance(r, m.JobResult) and r.ok:
                    self.cancelled.append(target)
            if i % 7 == 0:
                state = "DRAIN" if len(self.admin) % 2 == 0 else "RESUME"
                r = self._ask(m.UpdateNodes("n3", state, f"crash test {i}", "root"))
                self.admin.append((state, isinstance(r, m.UpdateResult) and r.ok))
            time.sleep(0.02)


def test_rctld_sigkill_loop_loses_nothing_and_runs_nothing_twice(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("RANCH_CRASH_SEED", "24")))
    with jobs_cluster(tmp_path, ["n1", "n2", "n3"], cpus=2) as c:
        start(c)
        work = Workload(c, rng)
        worker = threading.Thread(target=work.run, daemon=True)
        worker.start()
        try:
            for _ in range(CRASHES):
                time.sleep(rng.uniform(0.3, 1.5))
                c.kill_ctld()
                c.start_ctld()
        finally:
            work.stop.set()
            worker.join(10)
        # the long jobs nobody cancelled would hold their CPUs for 30 s: cancel them now
        leftover = [j for j in work.long if j not in work.cancelled]
        if leftover:
            r = c.request(m.CancelJobs(job_ids=tuple(leftover), user="crash", uid=os.getuid()))
            assert isinstance(r, m.JobResult)
        c.kill_ctld()  # one more, after the last change
        c.start_ctld()

        def records() -> dict[int, dict]:
            got = c.request(m.GetJobs(), timeout=10)
            assert isinstance(got, m.JobList), got
            return {j["job_id"]: j for j in got.jobs}

        assert len(work.jobs) >= 20, f"too little was acknowledged to judge: {work.errors}"
        c.wait_for(lambda: all(j in (recs := records()) and recs[j]["state"] in ENDED
                               for j in work.jobs), timeout=90, what="every job ended")
        recs = records()
        missing = [j for j in work.jobs if j not in recs]
        assert missing == [], f"acknowledged jobs lost: {missing}"
        wrong = {j: recs[j]["state"] for j in work.cancelled if recs[j]["state"] != "CANCELLED"}
        assert wrong == {}, f"acknowledged cancels not kept: {wrong}"
        bad_end = {j: recs[j]["state"] for j in work.jobs
                   if j not in work.long_all and recs[j]["state"] != "COMPLETED"}
        assert bad_end == {}, f"short jobs that did not complete: {bad_end}"
        assert all(recs[j]["end_time"] for j in work.jobs)  # one end each, recorded
        runs = Counter()
        log = tmp_path / "runs.log"
        for line in log.read_text().splitlines():
            jid, _restarts = line.split()
            runs[int(jid)] += 1
        twice = {j: n for j, n in runs.items() if n > 1}
        assert twice == {}, f"jobs that ran more than once: {twice}"
        ran = {j for j in work.jobs if recs[j]["state"] == "COMPLETED"}
        assert ran <= set(runs), f"completed without running: {sorted(ran - set(runs))}"
        # the admin changes: the last acknowledged one holds, unless a later one (whose reply
        # the crash ate) went through
        acked = [i for i, (_, ok) in enumerate(work.admin) if ok]
        if acked:
            allowed = {s for s, _ in work.admin[acked[-1]:]}
            n3 = c.state("n3")
            shown = "DRAIN" if "DRAIN" in n3 else "RESUME"
            assert shown in allowed, (n3, work.admin[acked[-1]:])
