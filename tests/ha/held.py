"""Work held across a takeover (issue 32): a batch job whose script runs an rrun step, and a
ralloc whose command is an rrun step, both on n3 (the steps partition, out of the flow's way),
both printing LINES numbered lines over about ten seconds, so the leader dies while they run.
`check` then holds them to what the issue asks: both ran to their end, every line arrived once
and in order, rrun and ralloc exited with their command's code, the recorded job and step
states agree, and no step was launched twice."""

from __future__ import annotations

import re
import subprocess

from tests.ha.lab import python
from tests.ha.pair import Pair, wait

LINES = 40
PACE = 0.25  # seconds between lines: the steps outlive a takeover (about 5 s)
STEP = ("echo started >> {starts}; i=0; while [ $i -lt {lines} ]; do echo {tag}$i; "
        "i=$((i+1)); sleep {pace}; done; exit {code}")


class Held:
    def __init__(self, p: Pair) -> None:
        self.p = p
        d = p.lab.dir
        self.starts = d / "step-starts"
        self.out = d / "held-batch.out"
        self.batch_job = 0
        self.alloc: subprocess.Popen | None = None

    def _step(self, tag: str, code: int) -> list[str]:
        return [python(), "-m", "ranch.cli.rrun", "sh", "-c",
                STEP.format(starts=self.starts, lines=LINES, tag=tag, pace=PACE, code=code)]

    def start(self) -> None:
        """The batch job (its step exits 3, its script 0) and the allocation (its step, so
        ralloc, exits 5); back once both steps print."""
        script = self.p.lab.dir / "held-batch.sh"
        step = " ".join(f"'{w}'" for w in self._step("a", 3))
        script.write_text(f"#!/bin/sh\necho $SLURM_JOB_ID >> {self.p.runs}\n{step}\n"
                          'echo "rrun exited $?"\n')
        done = self.p.cli("rbatch", "-p", "steps", "-c1", "-o", str(self.out), str(script))
        assert done.returncode == 0, done.stderr
        self.batch_job = int(done.stdout.split()[-1])
        self.alloc = self.p.lab.spawn("ralloc", "cl", [
            python(), "-m", "ranch.cli.ralloc", "-p", "steps", "-c1", *self._step("b", 5)],
            env=self.p.env)
        wait(lambda: self._lines("a") and self._lines("b"), 60, "both held steps to print")

    def alloc_job(self) -> int:
        got = re.search(r"Granted job allocation (\d+)", self.p.lab.log("ralloc"))
        return int(got.group(1)) if got else 0

    def _lines(self, tag: str) -> list[str]:
        text = self.p.lab.log("ralloc") if tag == "b" else (
            self.out.read_text() if self.out.exists() else "")
        return [x for x in text.splitlines() if re.fullmatch(rf"{tag}\d+", x)]

    def check(self) -> None:
        assert self.alloc is not None
        want = lambda tag: [f"{tag}{i}" for i in range(LINES)]  # noqa: E731
        rc = self.alloc.wait(90)
        log = self.p.lab.log("ralloc")
        assert rc == 5, f"ralloc exited {rc}, not its command's 5:\n{log[-2000:]}"
        assert self._lines("b") == want("b"), log[-2000:]
        wait(lambda: "rrun exited" in (self.out.read_text() if self.out.exists() else ""), 60,
             "the held batch job's rrun to end")
        assert self._lines("a") == want("a"), self.out.read_text()[-2000:]
        assert "rrun exited 3" in self.out.read_text()
        starts = self.starts.read_text().split()
        assert len(starts) == 2, f"held steps started {len(starts)} times, not once each"
        # the controller that took over recorded what they ended with (racct: with
        # MinJobAge=2 the jobs soon leave its memory for the job history)
        want = {self.batch_job: {"": ("COMPLETED", "0:0"), ".0": ("FAILED", "3:0")},
                self.alloc_job(): {"": ("FAILED", "5:0"), ".0": ("FAILED", "5:0")}}
        for job, rows in want.items():
            def acct(job: int = job) -> dict[str, tuple[str, ...]]:
                done = self.p.cli("racct", "-j", str(job), "-P", "-n", "-o",
                                  "JobID,State,ExitCode")
                return {r.split("|")[0][len(str(job)):]: tuple(r.split("|")[1:])
                        for r in done.stdout.split()}
            got = wait(lambda a=acct, r=rows: (g := a()) and all(g.get(k) == v for k, v in
                                                               r.items()) and g, 30,
                       f"job {job} recorded as {rows}")
            assert len([k for k in got if k == ""]) == 1, got
