"""sbatch 22.05 and the environment: the input variables it reads as options (SBATCH_*; ralloc
gives salloc's), and what it sets itself in the job's environment before sending it
(src/sbatch/), whatever --export keeps: the job inherits these, and the node sets SLURM_NTASKS
and SLURM_CPUS_PER_TASK only for jobs whose submitter asked for tasks or CPUs a task (checked
against a real Slurm by tests/conformance/)."""

from __future__ import annotations

import os

from ranch.cli.sbatch_options import BY_LONG, NO, OPTIONAL, arg, store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ranch.cli.sbatch_options import Options

# sbatch 22.05's input environment variables (src/sbatch/opt.c env_vars[]), in its order.
ENV_VARS: tuple[tuple[str, str], ...] = (
    ("SBATCH_ACCOUNT", "account"), ("SBATCH_ARRAY_INX", "array"),
    ("SBATCH_ACCTG_FREQ", "acctg-freq"), ("SBATCH_BATCH", "batch"),
    ("SBATCH_BURST_BUFFER", "bb"), ("SBATCH_CLUSTER_CONSTRAINT", "cluster-constraint"),
    ("SBATCH_CLUSTERS", "clusters"), ("SLURM_CLUSTERS", "clusters"),
    ("SBATCH_CONTAINER", "container"), ("SBATCH_CONSTRAINT", "constraint"),
    ("SBATCH_CORE_SPEC", "core-spec"), ("SBATCH_CPU_FREQ_REQ", "cpu-freq"),
    ("SBATCH_CPUS_PER_GPU", "cpus-per-gpu"), ("SBATCH_DEBUG", "verbose"),
    ("SBATCH_DELAY_BOOT", "delay-boot"), ("SBATCH_DISTRIBUTION", "distribution"),
    ("SBATCH_EXCLUSIVE", "exclusive"), ("SBATCH_EXPORT", "export"),
    ("SBATCH_GET_USER_ENV", "get-user-env"), ("SBATCH_GRES", "gres"),
    ("SBATCH_GRES_FLAGS", "gres-flags"), ("SBATCH_GPUS", "gpus"),
    ("SBATCH_GPU_BIND", "gpu-bind"), ("SBATCH_GPU_FREQ", "gpu-freq"),
    ("SBATCH_GPUS_PER_NODE", "gpus-per-node"), ("SBATCH_GPUS_PER_SOCKET", "gpus-per-socket"),
    ("SBATCH_GPUS_PER_TASK", "gpus-per-task"), ("SLURM_HINT", "hint"), ("SBATCH_HINT", "hint"),
    ("SBATCH_JOB_NAME", "job-name"), ("SBATCH_MEM_BIND", "mem-bind"),
    ("SBATCH_MEM_PER_CPU", "mem-per-cpu"), ("SBATCH_MEM_PER_GPU", "mem-per-gpu"),
    ("SBATCH_MEM_PER_NODE", "mem"), ("SBATCH_NETWORK", "network"),
    ("SBATCH_NO_KILL", "no-kill"), ("SBATCH_NO_REQUEUE", "no-requeue"),
    ("SBATCH_OPEN_MODE", "open-mode"), ("SBATCH_OVERCOMMIT", "overcommit"),
    ("SBATCH_PARTITION", "partition"), ("SBATCH_POWER", "power"),
    ("SBATCH_PROFILE", "profile"), ("SBATCH_QOS", "qos"), ("SBATCH_REQ_SWITCH", "switches"),
    ("SBATCH_REQUEUE", "requeue"), ("SBATCH_RESERVATION", "reservation"),
    ("SBATCH_SIGNAL", "signal"), ("SBATCH_SPREAD_JOB", "spread-job"),
    ("SBATCH_THREAD_SPEC", "thread-spec"), ("SBATCH_THREADS_PER_CORE", "threads-per-core"),
    ("SBATCH_TIMELIMIT", "time"), ("SBATCH_USE_MIN_NODES", "use-min-nodes"),
    ("SBATCH_WAIT", "wait"), ("SBATCH_WAIT_ALL_NODES", "wait-all-nodes"),
    ("SBATCH_WCKEY", "wckey"), ("SBATCH_ERROR", "error"), ("SBATCH_INPUT", "input"),
    ("SBATCH_OUTPUT", "output"),
)


def _env_flag(text: str) -> bool:
    """A flag set by a variable: empty, "yes" or a non-zero number turn it on."""
    t = text.strip()
    if not t or t.lower() == "yes":
        return True
    try:
        return int(t) != 0
    except ValueError:
        return False


def from_environment(env: Mapping[str, str], variables: Iterable[tuple[str, str]] = ENV_VARS,
                     options: Options | None = None) -> dict[str, object]:
    """The options sbatch takes from its SBATCH_* input variables (later ones in the table win,
    as sbatch processes them in order); `variables` and `options`: another command's (salloc's
    SALLOC_* variables and table)."""
    by_long = options.by_long if options is not None else BY_LONG
    values: dict[str, object] = {}
    for var, long in variables:
        text = env.get(var)
        if text is None:
            continue
        opt = by_long[long]
        if opt.arg == NO:
            if _env_flag(text):
                store(values, opt, True)
        elif opt.arg == OPTIONAL:
            store(values, opt, text or None)
        else:
            store(values, opt, text)
    return values


def slurm_env(v: dict[str, object], res: dict[str, object]
              ) -> tuple[dict[str, str], dict[str, str]]:
    """(variables sbatch sets in its own environment before copying it, variables it adds to
    the job's after --export's filter)."""
    before: dict[str, str] = {}
    if "open-mode" in v:
        from ranch.cli.sbatch_values import open_mode

        before["SLURM_OPEN_MODE"] = "a" if open_mode(arg(v, "open-mode")) == "append" else "t"
    if v.get("dependency"):
        before["SLURM_JOB_DEPENDENCY"] = str(v["dependency"])
    export = v.get("export")
    if export is not None and str(export).upper() != "ALL":
        before["SLURM_EXPORT_ENV"] = str(export)
    after = added(v)
    if res.get("ntasks_per_node"):
        after["SLURM_NTASKS_PER_NODE"] = str(res["ntasks_per_node"])
    if res.get("cpus_per_gpu"):
        after["SLURM_CPUS_PER_GPU"] = str(res["cpus_per_gpu"])
    if "gpus-per-node" in v:
        after["SLURM_GPUS_PER_NODE"] = str(v["gpus-per-node"])
    if res.get("gpus_per_task"):
        after["SLURM_GPUS_PER_TASK"] = str(v["gpus-per-task"])
    if res.get("mem_per_gpu"):
        after["SLURM_MEM_PER_GPU"] = str(res["mem_per_gpu"])
    if res.get("mem_per_cpu"):
        after["SLURM_MEM_PER_CPU"] = str(res["mem_per_cpu"])
    if "mem" in v:
        after["SLURM_MEM_PER_NODE"] = str(res["mem_mib"])
    if arg(v, "account"):  # slurmctld lowercases it; slurmd sets it when the job has one
        after["SLURM_JOB_ACCOUNT"] = arg(v, "account").lower()
    if v.get("array"):  # the same in every task of the array: the node need not know them
        from ranch.cli.sbatch_script import array_env, array_spec

        after.update(array_env(array_spec(str(v["array"]))))
    if "get-user-env" in v or (export is not None and str(export).upper() != "ALL"):
        after["SLURM_GET_USER_ENV"] = "1"  # sbatch: NONE and lists imply --get-user-env
    return before, after


def added(v: dict[str, object]) -> dict[str, str]:
    """`v`: rbatch's option values by long name."""
    env = {"SLURM_SUBMIT_DIR": os.getcwd(),  # where sbatch ran, whatever -D says
           "SLURM_SUBMIT_HOST": os.uname().nodename}
    try:
        env["SLURM_PRIO_PROCESS"] = str(os.getpriority(os.PRIO_PROCESS, 0))
    except OSError:
        pass
    if v.get("ntasks") is not None:
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(v["ntasks"])
    if v.get("cpus-per-task") is not None:
        env["SLURM_CPUS_PER_TASK"] = str(v["cpus-per-task"])
    return env
