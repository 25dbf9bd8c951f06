"""Work held across a takeover (issue 32), in the steps partition (n3, n4: out of the flow's
way): a batch job whose script runs an rrun step, a ralloc whose command is an rrun step, and
an rrun that makes its own allocation; each step prints LINES numbered lines over about 16 s,
so the leader dies while they run and the new one serves for longer than InactiveLimit (5 s)
before they end: the holders must speak to it. `check` then holds them to what the issue
asks: all ran to their end, every line arrived once and in order, rrun and ralloc exited with
their command's code, the recorded job and step states agree, no step was launched twice."""

from __future__ import annotations

import re
import subprocess

from tests.ha.lab import python
from tests.ha.pair import Pair, wait

LINES = 64
PACE = 0.25  # seconds between lines
STEP = ("echo {tag} $SLURM_JOB_ID >> {starts}; i=0; while [ $i -lt {lines} ]; do "
        "echo {tag}$i; i=$((i+1)); sleep {pace}; done; exit {code}")
# tag: (its step's exit code, the job's recorded state and exit code)
HELD = {"a": (3, ("COMPLETED", "0:0")),  # the batch script goes on after rrun: exit 0
        "b": (5, ("FAILED", "5:0")),  # ralloc's command
        "c": (4, ("FAILED", "4:0"))}  # rrun's own allocation


class Held:
    def __init__(self, p: Pair) -> None:
        self.p = p
        d = p.lab.dir
        self.starts = d / "step-starts"
        self.out = d / "held-batch.out"
        self.procs: dict[str, subprocess.Popen] = {}

    def _step(self, tag: str) -> list[str]:
        return [python(), "-m", "ranch.cli.rrun", "sh", "-c",
                STEP.format(starts=self.starts, lines=LINES, tag=tag, pace=PACE,
                            code=HELD[tag][0])]

    def start(self) -> None:
        """The three holders; back once every step prints."""
        script = self.p.lab.dir / "held-batch.sh"
        step = " ".join(f"'{w}'" for w in self._step("a"))
        script.write_text(f"#!/bin/sh\necho $SLURM_JOB_ID >> {self.p.runs}\n{step}\n"
                          'echo "rrun exited $?"\n')
        done = self.p.cli("rbatch", "-p", "steps", "-w", "n3", "-c1", "-o", str(self.out),
                          str(script))
        assert done.returncode == 0, done.stderr
        self.procs["b"] = self.p.lab.spawn("held-b", "cl", [
            python(), "-m", "ranch.cli.ralloc", "-p", "steps", "-w", "n3", "-c1",
            *self._step("b")], env=self.p.env)
        own = self._step("c")
        self.procs["c"] = self.p.lab.spawn("held-c", "cl", [
            *own[:3], "-p", "steps", "-w", "n4", "-c1", *own[3:]], env=self.p.env)
        wait(lambda: all(self._lines(t) for t in HELD), 60, "every held step to print")

    def _text(self, tag: str) -> str:
        if tag == "a":
            return self.out.read_text() if self.out.exists() else ""
        return self.p.lab.log(f"held-{tag}")

    def _lines(self, tag: str) -> list[str]:
        return [x for x in self._text(tag).splitlines() if re.fullmatch(rf"{tag}\d+", x)]

    def check(self) -> None:
        for tag in ("b", "c"):
            rc = self.procs[tag].wait(90)
            assert rc == HELD[tag][0], (f"held-{tag} exited {rc}, not its command's "
                                        f"{HELD[tag][0]}:\n{self._text(tag)[-2000:]}")
        wait(lambda: "rrun exited" in self._text("a"), 60, "the held batch job's rrun to end")
        assert "rrun exited 3" in self._text("a")
        for tag in HELD:
            assert self._lines(tag) == [f"{tag}{i}" for i in range(LINES)], \
                self._text(tag)[-2000:]
        starts = [line.split() for line in self.starts.read_text().splitlines()]
        assert sorted(t for t, _ in starts) == sorted(HELD), f"steps started: {starts}"
        # the controller that took over recorded what they ended with (racct: with
        # MinJobAge=2 the jobs soon leave its memory for the job history)
        for tag, job in starts:
            code, (state, exit_code) = HELD[tag]
            rows = {"": (state, exit_code), ".0": ("FAILED", f"{code}:0")}

            def acct(job: str = job) -> dict[str, tuple[str, ...]]:
                done = self.p.cli("racct", "-j", job, "-P", "-n", "-o", "JobID,State,ExitCode")
                return {r.split("|")[0][len(job):]: tuple(r.split("|")[1:])
                        for r in done.stdout.split()}
            wait(lambda a=acct, r=rows: (g := a()) and all(g.get(k) == v for k, v in
                                                           r.items()) and g, 30,
                 f"job {job} ({tag}) recorded as {rows}")
        # nothing launched or ended twice, by either controller
        logs = self.p.lab.log("c1") + self.p.lab.log("c2")
        for _tag, job in starts:
            for what in ("job started job=", "step started job=", "step ended job=",
                         "job ended job="):
                n = len(re.findall(rf"\b{what}{job}\b", logs))
                assert n == 1, f"'{what}{job}' logged {n} times"
