"""The job steps compared with srun 22.05: batch jobs whose scripts run srun (rrun on Ranch,
through its `srun` shim) many times, each call's stdout, stderr and exit code kept in files
named for the case (NAME.out, NAME.err, NAME.rc); env cases also keep each task's environment
(NAME.env.tPROCID, NUL-separated)."""

from __future__ import annotations

import attrs

from tests.conformance.scenarios import Scenario

# r NAME CMD...: run one srun, keep what it printed and its exit code
RUN = 'r() { n=$1; shift; "$@" > "$n.out" 2> "$n.err"; echo $? > "$n.rc"; }\n'


@attrs.frozen
class Case:
    name: str  # file prefix, unique over every job
    srun: str  # srun's options, as shell words
    command: str = ""  # the tasks' command, as shell words ("" for env cases)
    env: bool = False  # each task writes its environment to NAME.env.$SLURM_PROCID
    before: str = ""  # shell before the call (a pipe into srun's stdin, files it finds)

    @property
    def line(self) -> str:
        command = self.command or f"sh -c 'env -0 > {self.name}.env.t$SLURM_PROCID'"
        return f"{self.before} r {self.name} srun {self.srun} {command}".replace("  ", " ").strip()


@attrs.frozen
class StepJob:
    name: str
    options: tuple[str, ...]
    cases: tuple[Case, ...] = ()
    extra: str = ""  # shell after the cases (the concurrency and signal scenes)

    @property
    def scenario(self) -> Scenario:
        body = RUN + "".join(c.line + "\n" for c in self.cases) + self.extra
        return Scenario(self.name, body, self.options)


NODE = "printenv SLURMD_NODENAME"
OUT_ERR = "sh -c 'echo out $SLURM_PROCID; echo err $SLURM_PROCID >&2'"
NAMES = "sh -c 'echo $SLURM_STEP_ID $SLURM_STEPID $SLURM_JOB_NAME'"


def _env(name: str, srun: str) -> Case:
    return Case(name, srun, env=True)


# A scene: steps started one after the other, each holding its CPUs until the last step said
# it waits for them, or ended, or 5 s passed (the scene's go file); then the first holder ends
# (the second only once the last step ended, so that a waiting step has one place to go).
# Their order is known without fixed sleeps, and a step that does not wait as srun's does
# costs 5 s, not a hang.
WAIT = "i=0; while [ $i -lt {n} ] && {cond}; do sleep 0.1; i=$((i+1)); done"
HOLD = ("sh -c 'echo {who} on $SLURMD_NODENAME; echo held > {who}.held; "
        + WAIT.replace("{n}", "100") + "'")


# A scene starts once the controller knows the previous scene's steps ended: srun exits on its
# tasks' exits, and the node's step-complete message may reach the controller after the next
# srun asked for its step (on a loaded machine it did, on either system), which then lands on
# the other node. Which node a step takes is what the scenes compare, so they wait for it.
NO_STEPS = WAIT.format(n=100, cond="squeue -h -s -j $SLURM_JOB_ID -o %i "
                                   "| grep -qv -e '[.]batch$' -e '[.]extern$'")


def _scene(name: str, first: list[str], last: str) -> str:
    lines = [NO_STEPS + "\n"]
    c = f"{name}c"
    for i, opts in enumerate(first):
        n = f"{name}{'ab'[i]}"
        until = f"[ ! -e {name}.go ]" if i == 0 else f"[ ! -s {c}.rc ]"
        lines.append(f"r {n} srun {opts} {HOLD.format(who=n, cond=until)} &\n"
                     + WAIT.format(n=100, cond=f"[ ! -s {n}.held ]") + "\n")
    lines.append(f"r {c} srun {last} sh -c 'echo {c} on $SLURMD_NODENAME' &\n"
                 + WAIT.format(n=50, cond=f"! grep -q retrying {c}.err 2>/dev/null "
                               f"&& [ ! -s {c}.rc ]")
                 + f"\ntouch {name}.go\nwait\n")
    return "".join(lines)


SCENES = {
    # two non-exact one-task steps hold a node each; a third waits for one to end
    "busy": (["-n1", "-n1"], "-n1"),
    # --exact: each holds one CPU, so the third fits beside them
    "exact": (["-n1 --exact", "-n1 --exact"], "-n1 --exact"),
    # --overlap: shares the CPUs the others hold
    "overlap": (["-n1", "-n1"], "-n1 --overlap"),
    # --exclusive (srun's default since 21.08)
    "exclusive": (["-n1 --exclusive", "-n1 --exclusive"], "-n1 --exclusive"),
    # -c given: does it imply --exact (as 22.05's man page says of --exclusive)?
    "cpt": (["-n1 -c1", "-n1 -c1"], "-n1 -c1"),
    # a one-task step on c1; a two-node step must wait for it
    "wide": (["-n1"], "-N2 -n2"),
}

# srun's own signals: SIGTERM/SIGHUP/SIGQUIT end the step (not passed on), USR1 is passed on.
# The signal goes to srun only once both sides are ready for it: each task's trap is set (its
# ready file) and srun runs the step (the tasks' "ready" lines came through it). The wait is
# bounded only far beyond any load (60 s): a signal sent early, under a loaded machine's 10 s
# bound, reached Slurm's srun before its step and the tasks slept on (`ready ready`, rc 0).
SIGNAL = ("srun -n2 sh -c 'trap \"echo got {sig}; exit 7\" {sig}; echo ready; "
          ": > sig{sig}.ready$SLURM_PROCID; sleep 30 & wait' > sig{sig}.out 2> sig{sig}.err "
          "& p=$!\n"
          + WAIT.format(n=600, cond="{{ [ ! -e sig{sig}.ready0 ] || [ ! -e sig{sig}.ready1 ] || "
                                   "[ \"$(grep -c ready sig{sig}.out)\" != 2 ]; }}") + "\n"
          "kill -{sig} $p; wait $p; echo $? > sig{sig}.rc\n")

# Ctrl-C: once (srun reports, the tasks go on and end by themselves), twice (SIGINT to them)
CTRL_C = ("srun -n2 sh -c 'echo ready; " + WAIT.format(n=50, cond="[ ! -e int1.go ]")
          + "' > int1.out 2> int1.err & p=$!\n"
          + WAIT.format(n=100, cond='[ "$(grep -c ready int1.out)" != 2 ]') + "\n"
          "kill -INT $p\n" + WAIT.format(n=50, cond="! grep -q running int1.err") + "\n"
          "touch int1.go; wait $p; echo $? > int1.rc\n"
          "srun -n2 sh -c 'echo ready; exec sleep 30' > int2.out 2> int2.err & p=$!\n"
          + WAIT.format(n=100, cond='[ "$(grep -c ready int2.out)" != 2 ]') + "\n"
          "kill -INT $p\n" + WAIT.format(n=50, cond="! grep -q running int2.err") + "\n"
          "kill -INT $p; wait $p; echo $? > int2.rc\n")

JOBS: list[StepJob] = [
    StepJob("steps env", ("-N", "2", "-n", "4", "-J", "stepenv"), (
        _env("env_N2_n3", "-N2 -n3"),
        _env("env_N2_n2_c2", "-N2 -n2 -c2"),
        _env("env_tpn2", "-N2 --ntasks-per-node=2"),
        _env("env_label", "-l"),
        _env("env_n1", "-n1"),
    )),
    # no -n: SLURM_NTASKS is not set in the job, so srun's default is a task per node
    StepJob("steps env no -n", ("-N", "2", "-J", "stepenv2"), (
        _env("env_default", ""),
        # a CPU a node: three tasks do not fit (srun: More processors requested than permitted)
        Case("refused_n3", "-n3", "true"),
    )),
    # the job's -c: does srun 22.05 take SLURM_CPUS_PER_TASK as its own -c?
    StepJob("steps env -c", ("-N", "2", "-n", "2", "-c", "2", "-J", "stepenv3"), (
        _env("env_job_c2", ""),
        Case("lay_job_c2_n4", "-l -n4", NODE),
    )),
    # the job's --ntasks-per-node (SLURM_NTASKS_PER_NODE in the script)
    StepJob("steps env tpn", ("-N", "2", "--ntasks-per-node=2", "-J", "stepenv4"), (
        _env("env_job_tpn2", ""),
        Case("lay_job_tpn2_n2", "-l -n2", NODE),
        Case("lay_job_tpn2_N1", "-l -N1", NODE),
    )),
    StepJob("steps layout", ("-N", "2", "-n", "4"), (
        Case("lay_n3", "-l -n3", NODE),
        Case("lay_N2", "-l -N2", NODE),
        Case("lay_n2", "-l -n2", NODE),
        Case("lay_n1", "-l -n1", NODE),
        Case("lay_N1_n2", "-l -N1 -n2", NODE),
        Case("lay_N1_n3", "-l -N1 -n3", NODE),
        Case("lay_n5", "-l -n5", NODE),
        Case("lay_N1", "-l -N1", NODE),
        Case("lay_tpn1", "-l --ntasks-per-node=1", NODE),
        Case("lay_N2_tpn1", "-l -N2 -n2 --ntasks-per-node=1", NODE),
        Case("lay_n4_tpn2", "-l -n4 --ntasks-per-node=2", NODE),
        Case("lay_w_c2", "-l -w c2 -n2", NODE),
        Case("lay_N3", "-N3", "true"),  # more nodes than the job has
        Case("lay_w_c3", "-w c3", "true"),  # a node the job does not have
    )),
    StepJob("steps io", ("-N", "2", "-n", "4", "-J", "stepio"), (
        Case("io_label", "-l -n3", OUT_ERR),
        Case("io_plain", "-n3", OUT_ERR),
        Case("io_label_wide", "-l -n4", "sh -c 'printf \"a\\nb\\n\"'"),
        Case("io_patterns", "-n3 -o 'o_j%j_J%J_s%s_t%t_n%n_N%N_u%u_x%x.txt' -e 'e_t%t_w%2t.txt'",
             OUT_ERR),
        # (not all_%j: srun 22.05 takes an -o beginning with "all" for -o all, to srun)
        Case("io_one_file", "-n3 -o 'one_%j.txt'", OUT_ERR),
        # -o files that exist already are truncated (each task's, each node's)
        Case("io_truncate_task", "-n2 -o 'trunc_t%t.txt'", "sh -c 'echo new $SLURM_PROCID'",
             before="echo old > trunc_t0.txt; echo old > trunc_t1.txt;"),
        Case("io_truncate_node", "-n4 -o 'trunc_n%n.txt'", "sh -c 'echo new $SLURM_PROCID'",
             before="echo old > trunc_n0.txt; echo old > trunc_n1.txt;"),
        Case("io_unbuffered", "-n1 -u", "sh -c 'printf a; sleep 0.2; printf \"b\\n\"'"),
        # a last line without its newline
        Case("io_partial", "-n2", "printf x"),
        Case("io_partial_label", "-n2 -l", "sh -c 'printf \"a\\nb\"'"),
        Case("io_label_unbuffered", "-n2 -l -u", "sh -c 'printf \"x$SLURM_PROCID\\n\"'"),
        # srun's stdin goes to every task by default; -i none: to none; -i 1: to task 1
        Case("io_stdin", "-n2 -l", "cat", before="echo in |"),
        Case("io_stdin_none", "-n2 -l -i none", "cat", before="echo in |"),
        Case("io_stdin_task", "-n2 -l -i 1", "cat", before="echo in |"),
        # --export=NONE: no PATH, so a command named without a path is not found
        Case("io_export_none", "-n2 --export=NONE", "sh -c 'echo ${SLURM_JOB_ID:+jobid}'"),
        Case("io_export_none_path", "-n2 --export=NONE",
             "/bin/sh -c 'echo ${HOME:-nohome} ${SLURM_JOB_ID:+jobid}'"),
        Case("io_chdir", "-n2 -D /tmp", "pwd"),
        Case("ids", "-n1", NAMES),
        Case("ids_named", "-n1 -J named", NAMES),
    )),
    StepJob("steps exits", ("-N", "2", "-n", "4"), (
        Case("exit3", "-n1", "sh -c 'exit 3'"),
        Case("exit_all", "-n4", "sh -c 'exit 2'"),
        Case("exit_some", "-n4", "sh -c 'exit $((SLURM_PROCID % 2 * 5))'"),
        Case("kill9", "-n1", "sh -c 'kill -9 $$'"),
        Case("killTERM", "-n2", "sh -c 'kill -TERM $$'"),
        # task 0 fails once task 1 runs (else srun may end before task 1 even started)
        Case("K", "-n2 -K", "sh -c 'if [ $SLURM_PROCID = 0 ]; then "
             + WAIT.format(n=100, cond="[ ! -e K.ready ]") + "; exit 4; fi; "
             "touch K.ready; exec sleep 20'"),
        Case("nonexistent", "-n1", "/nonexistent/cmd"),
        Case("not_on_path", "-n1", "no-such-command-here"),
    )),
    StepJob("steps concurrency", ("-N", "2", "-n", "4"), extra="".join(
        _scene(name, first, last) for name, (first, last) in SCENES.items())
        + "".join(SIGNAL.format(sig=s) for s in ("TERM", "HUP", "QUIT", "USR1")) + CTRL_C),
]

CASES: dict[str, tuple[StepJob, Case]] = {c.name: (j, c) for j in JOBS for c in j.cases}
ENV_CASES = [c.name for j in JOBS for c in j.cases if c.env]
OUTPUT_CASES = [c.name for j in JOBS for c in j.cases]
# the scenes' steps and srun's signals: (file prefix, job)
SCENE_FILES = [f"{n}{x}" for n, (first, _) in SCENES.items()
               for x in [*"ab"[:len(first)], "c"]] + [
                  f"sig{s}" for s in ("TERM", "HUP", "QUIT", "USR1")] + ["int1", "int2"]
SCENE_JOB = next(j for j in JOBS if j.extra)
SCENARIOS = [j.scenario for j in JOBS]
assert len(CASES) == sum(len(j.cases) for j in JOBS), "case names must be unique"
