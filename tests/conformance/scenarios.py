"""The scenario table: one batch script and its sbatch options each, run the same way on real
Slurm and on Ranch (runner.py), then compared field by field (test_*.py)."""

from __future__ import annotations

import re

import attrs

# Job states after which nothing more happens to a job
FINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                   "BOOT_FAIL", "DEADLINE", "PREEMPTED"})
STARTED = "started"  # what a script prints once it runs; the runner acts when it sees it


@attrs.frozen
class Scenario:
    name: str
    body: str  # the script after its #!/bin/sh line (or the --wrap command)
    options: tuple[str, ...] = ()  # sbatch's command-line options
    # "" | "cancel-pending": scancel once it is PENDING | "cancel-running": scancel once the
    # script printed STARTED | "requeue": scontrol requeue once the script printed STARTED
    action: str = ""
    watch: bool = False  # note squeue's state letter once the script printed STARTED
    until: str = ""  # the job counts as ended only once its output holds this text as well
    wrap: bool = False  # submit `--wrap BODY` instead of a script file
    subdir: str = ""  # made in the scenario's directory before it is submitted (for -D)

    @property
    def slug(self) -> str:
        """The scenario's directory (its jobs are submitted from there)."""
        return re.sub(r"[^A-Za-z0-9]+", "_", self.name).strip("_")

    @property
    def script_name(self) -> str:
        return self.slug + ".sh"

    @property
    def script(self) -> str:
        return f"#!/bin/sh\n{self.body}\n"


# exec: the job is one process, so how it ends does not hang on which of the shell and its
# child a SIGTERM reaches first (Slurm's proctrack/linuxproc signals them one by one)
LONG = f"echo {STARTED}; exec sleep 300"

_END_STATES = [
    Scenario("exit 0", f"echo {STARTED}; exit 0"),
    Scenario("exit 3", "exit 3"),
    Scenario("kill -9", "kill -9 $$"),
    Scenario("kill -TERM", "kill -TERM $$"),
    Scenario("cancel pending", LONG, ("--hold",), action="cancel-pending"),
    Scenario("cancel running", LONG, action="cancel-running", watch=True),
]


def _limited(s: Scenario) -> Scenario:
    return attrs.evolve(s, name=f"{s.name} -t 1", options=(*s.options, "-t", "1"))


END_STATES: list[Scenario] = [
    # first: the slowest (Slurm checks time limits every 30 s, so this ends 60-90 s in)
    Scenario("timeout -t 1", LONG, ("-t", "1"), watch=True),
    *_END_STATES,
    *[_limited(s) for s in _END_STATES],
    # a requeued job runs again with SLURM_RESTART_COUNT=1 (Slurm then truncates its output,
    # Ranch appends: README, deliberate differences)
    Scenario("requeue", 'echo "run ${SLURM_RESTART_COUNT:-none}"\n'
             'if [ -n "$SLURM_RESTART_COUNT" ]; then exit 0; fi\n' + LONG,
             action="requeue", watch=True, until="run 1"),
]

# NUL-separated, so that no value can break the parse; one file per node that runs it
ENV = 'env -0 > "env-$SLURMD_NODENAME"'
ENVIRONMENT: list[Scenario] = [
    Scenario("env defaults", ENV),
    Scenario("env -J -N 2 -n 2 --mem", ENV, ("-J", "envjob", "-N", "2", "-n", "2",
                                               "--mem=100M")),
    # -D moves the job, not SLURM_SUBMIT_DIR
    Scenario("env -c 2 -t 5 -D", ENV, ("-c", "2", "-t", "5", "-D", "sub"), subdir="sub"),
]

PATTERN = "o_%j_%4j_%x_%u_%N_%A_%a_%%.out"
OUTPUT: list[Scenario] = [
    Scenario("output patterns", "echo out; echo err >&2",
             ("-J", "patt", "-o", PATTERN, "-e", "e_%x_%j_%%.err")),
    Scenario("output step patterns", "echo out", ("-o", "p_%J_%n_%t_%s_%2n_%q.out")),
    # a backslash turns every pattern off (sbatch's man page, "filename pattern")
    Scenario("output escaped", "echo out", ("-o", "esc\\_%j.out")),
    Scenario("output one file", "echo out; echo err >&2", ("-o", "both-%j.txt")),
    # the batch script runs on the first node of the allocation only
    Scenario("runs once -N 2", 'echo "$SLURMD_NODENAME" >> ran', ("-N", "2")),
    Scenario("wrap", f"echo {STARTED}", wrap=True),
]

ALL: list[Scenario] = [*END_STATES, *ENVIRONMENT, *OUTPUT]
BY_NAME = {s.name: s for s in ALL}
assert len({s.slug for s in ALL}) == len(ALL), "scenario names must be unique"
