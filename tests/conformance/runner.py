"""Runs every scenario on every system at once: all submitted together, driven by one polling
loop (cancel when pending, cancel or requeue once the script runs), awaited together, then read
back with the commands users read them with (`scontrol show job -o`, `squeue`, the files)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import attrs

from tests.conformance.scenarios import FINAL, STARTED, Scenario


@attrs.define
class Outcome:
    """What one scenario left on one system."""

    scenario: Scenario
    system: str
    job_id: int = 0
    submit: str = ""  # sbatch's stdout and stderr
    acted: bool = False
    before: str = ""  # squeue's `%t %r` when the action was taken (or the script started)
    ended: bool = False
    fields: dict[str, str] = attrs.Factory(dict)  # scontrol show job -o
    end_letter: str = ""  # squeue -t all's %t once ended
    files: dict[str, str] = attrs.Factory(dict)  # the job's files: normalised name -> text
    acct: dict[str, str] = attrs.Factory(dict)  # sacct -c -P's fields of the job (ACCT_FIELDS)
    acct_table: list[str] = attrs.Factory(list)  # sacct -c -o ACCT_TABLE's lines for the job

    @property
    def out(self) -> str:
        """The default output file's text (in a -D directory, if one was given)."""
        return next((text for name, text in self.files.items()
                     if name.endswith("slurm-<jobid>.out")), "")


def parse_show_job(text: str) -> dict[int, dict[str, str]]:
    """`scontrol show job -o` (one job a line) -> {job id: {key: value}}."""
    jobs = {}
    for line in text.splitlines():
        if not line.strip().startswith("JobId="):
            continue
        fields = {}
        for word in re.split(r"\s+(?=[A-Za-z][\w:/]*=)", line.strip()):
            key, _, value = word.partition("=")
            fields[key] = value.strip()
        jobs[int(fields["JobId"])] = fields
    return jobs


def job_token(job_id: int) -> re.Pattern[str]:
    return re.compile(rf"(?<!\d)(0*){job_id}(?!\d)")


def normalise(text: str, job_id: int, workdir: Path) -> str:
    """The job id as <jobid> (<jobid/4> when zero-padded to 4) and the work dir as <workdir>,
    so that the two systems' values compare."""
    text = text.replace(str(workdir), "<workdir>")
    # a scenario's own directory under the work dir is its name, never a job id: `exit_3_t_1`
    # stays whole when the job happens to be number 3
    named: list[str] = []

    def keep(m: re.Match[str]) -> str:
        named.append(m.group(0))
        return f"\0{len(named) - 1}\0"

    text = re.sub(r"<workdir>/[^/\s]+(?=/)", keep, text)  # directories only: a file's may

    def one(m: re.Match[str]) -> str:
        return f"<jobid/{len(m.group(0))}>" if m.group(1) else "<jobid>"

    text = job_token(job_id).sub(one, text)
    return re.sub(r"\0(\d+)\0", lambda m: named[int(m.group(1))], text)


@attrs.frozen
class Results:
    slurm: dict[str, Outcome]
    ranch: dict[str, Outcome]
    workdirs: dict[str, str]  # system -> its work dir (gone now; for normalising)
    hostname: str  # what Slurm's %N writes (this host's name)
    log: tuple[str, ...]
    seconds: float

    def pair(self, scenario: str) -> tuple[Outcome, Outcome]:
        return self.slurm[scenario], self.ranch[scenario]


class Runner:
    def __init__(self, systems: list[Any], scenarios: list[Scenario],
                 timeout: float = 150.0, raw_names: bool = False) -> None:
        self.systems = systems
        self.raw_names = raw_names  # keep file names as they are (the job id not replaced)
        self.scenarios = scenarios
        self.timeout = timeout
        self.outcomes: dict[str, dict[str, Outcome]] = {
            s.name: {sc.name: Outcome(sc, s.name) for sc in scenarios} for s in systems}
        self.log: list[str] = []  # what the loop did, for a failing test's message

    def run(self) -> dict[str, dict[str, Outcome]]:
        self._submit()
        self._drive()
        for system in self.systems:
            self._settle(system)
            self._collect(system)
        return self.outcomes

    # -- submission ------------------------------------------------------------------------

    def _argv(self, sc: Scenario) -> list[str]:
        if sc.wrap:
            return [*sc.options, "--wrap", sc.body]
        return [*sc.options, f"../scripts/{sc.script_name}"]

    def _submit(self) -> None:
        for system in self.systems:
            scripts = system.workdir / "scripts"
            scripts.mkdir(exist_ok=True)
            for sc in self.scenarios:
                (scripts / sc.script_name).write_text(sc.script)
                (system.workdir / sc.slug / sc.subdir).mkdir(parents=True)
        # the first scenario is the slowest: give it the first start on every system
        first, rest = self.scenarios[:1], self.scenarios[1:]
        for batch in (first, rest):
            procs = [(system, sc, system.popen("sbatch", *self._argv(sc),
                                               cwd=system.workdir / sc.slug))
                     for sc in batch for system in self.systems]
            for system, sc, proc in procs:
                out, err = proc.communicate(timeout=60)
                o = self.outcomes[system.name][sc.name]
                o.submit = (out + err).strip()
                m = re.match(r"Submitted batch job (\d+)$", out.strip())
                if proc.returncode == 0 and m:
                    o.job_id = int(m.group(1))
                else:
                    o.ended = True  # nothing to wait for; the tests show `submit`

    # -- the loop --------------------------------------------------------------------------

    def _drive(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            waiting = False
            for system in self.systems:
                try:
                    states = system.states()
                except Exception as exc:  # a poll that failed is retried on the next round
                    self.log.append(f"{system.name}: poll failed: {exc}")
                    waiting = True
                    continue
                for o in self.outcomes[system.name].values():
                    if not o.ended:
                        self._step(system, o, states.get(o.job_id, ("", "")))
                        waiting |= not o.ended
            if not waiting:
                return
            time.sleep(0.25)
        self.log.append(f"gave up waiting after {self.timeout:g} s")

    def _step(self, system: Any, o: Outcome, st: tuple[str, str]) -> None:
        sc, state = o.scenario, st[0]
        text = ""
        if sc.action or sc.watch or sc.until:
            path = system.workdir / sc.slug / f"slurm-{o.job_id}.out"
            text = path.read_text(errors="replace") if path.exists() else ""
        if not o.acted and state not in FINAL:
            if sc.action == "cancel-pending" and state == "PENDING":
                self._act(system, o, "scancel", str(o.job_id))
            elif sc.action == "cancel-running" and STARTED in text:
                self._act(system, o, "scancel", str(o.job_id))
            elif sc.action == "requeue" and STARTED in text:
                self._act(system, o, "scontrol", "requeue", str(o.job_id))
            elif sc.watch and not sc.action and STARTED in text:
                self._act(system, o)
        if state in FINAL and (o.acted or not sc.action) and sc.until in text:
            o.ended = True

    def _act(self, system: Any, o: Outcome, *command: str) -> None:
        o.before = system.run("squeue", "-h", "-j", str(o.job_id), "-o", "%t %r").stdout.strip()
        if command:
            done = system.run(*command)
            self.log.append(f"{system.name} {o.scenario.name}: {' '.join(command)} -> "
                            f"{done.returncode} {done.stderr.strip()}")
        o.acted = True

    # -- reading back ----------------------------------------------------------------------

    def _settle(self, system: Any) -> None:
        """Until no node is still cleaning up after a job (Slurm's COMPLETING)."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not system.nodes_idle():
            time.sleep(0.2)

    def _collect(self, system: Any) -> None:
        self._collect_acct(system)
        shown = parse_show_job(system.run("scontrol", "show", "job", "-o").stdout)
        letters = {}
        for line in system.run("squeue", "-h", "-t", "all", "-o", "%i %t").stdout.splitlines():
            jid, _, letter = line.partition(" ")
            letters[jid.strip()] = letter.strip()
        for o in self.outcomes[system.name].values():
            if not o.job_id:
                continue
            o.fields = shown.get(o.job_id, {})
            o.end_letter = letters.get(str(o.job_id), "")
            top = system.workdir / o.scenario.slug
            for path in sorted(p for p in top.rglob("*") if p.is_file()):
                name = str(path.relative_to(top))
                if not self.raw_names:
                    name = normalise(name, o.job_id, system.workdir)
                o.files[name] = path.read_text(
                    errors="replace")

    def _collect_acct(self, system: Any) -> None:
        """sacct --completion (Slurm's jobcomp/filetxt file; racct's history), read the way
        submitit and people read it: -P with named fields, and the fixed-width table."""
        ids = [str(o.job_id) for o in self.outcomes[system.name].values() if o.job_id]
        if not ids:
            return
        base = ("sacct", "-c", "-a", "-X", "-j", ",".join(ids))
        rows = system.run(*base, "-P", "-n", "-o", ",".join(ACCT_FIELDS)).stdout
        table = system.run(*base, "-o", ACCT_TABLE).stdout.splitlines()
        by_id: dict[str, dict[str, str]] = {}
        for line in rows.splitlines():
            values = line.split("|")
            if len(values) == len(ACCT_FIELDS):
                by_id[values[0]] = dict(zip(ACCT_FIELDS, values, strict=True))
        for o in self.outcomes[system.name].values():
            o.acct = by_id.get(str(o.job_id), {})
            o.acct_table = table[:2] + [t for t in table[2:]
                                        if t.split(" ", 1)[0] == str(o.job_id)]


# What `sacct --completion` gives on Slurm without slurmdbd (tests/conformance/README.md)
ACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "NodeList", "Start", "End", "Elapsed")
ACCT_TABLE = "JobID,JobName,State,ExitCode,Elapsed"
