"""ralloc: salloc 22.05's twin (issue 20). Allocates nodes (sbatch's resource options), runs a
command on this host with the allocation's SLURM_* environment (the user's login shell when
none is given), releases the allocation when it ends and exits with its exit code.

    ralloc -N2 -t 30 sh -c 'rrun hostname; echo $SLURM_JOB_NODELIST'

What salloc does is mirrored and was checked against a real one (tests/conformance/
test_alloc.py): its stderr lines, the job's end (COMPLETED 0:0, FAILED N:0), a signal while
waiting withdrawing the job, and an allocation revoked under a running command leaving that
command running unless -K/--kill-command asks for a signal.
"""

from __future__ import annotations

import os
import sys

from ranch.cli import sbatch_options as so
from ranch.cli.controller import LAUNCHER_USAGE, CliError, find_target
from ranch.cli.slurm_names import prog, version_text

# sbatch's options that salloc 22.05 does not take
SBATCH_ONLY = frozenset({"array", "batch", "error", "export", "export-file", "ignore-pbs",
                         "input", "kill-on-invalid-dep", "no-requeue", "requeue", "open-mode",
                         "output", "parsable", "propagate", "test-only", "wait", "wrap"})
SALLOC_ONLY = (
    so.Opt("bell", "", so.NO),
    so.Opt("immediate", "I", so.OPTIONAL, "SECS",
           "give up unless the allocation is granted within SECS (default 1)"),
    so.Opt("kill-command", "K", so.OPTIONAL, "SIGNAL",
           "signal the command when the allocation is revoked (default TERM)"),
    so.Opt("no-bell", "", so.NO),
    so.Opt("no-shell", "", so.NO, "", "allocate, then exit at once (rcancel releases it)"),
    so.Opt("x11", "", so.OPTIONAL),
)
OPTIONS = so.Options(sorted((o for o in so.BY_LONG.values()
                             if o.long not in SBATCH_ONLY and o not in so.RANCH_OPTS),
                            key=lambda o: o.long) + sorted(SALLOC_ONLY, key=lambda o: o.long)
                     + list(so.RANCH_OPTS))
# salloc 22.05's input variables (src/salloc/opt.c env_vars[]), in its order
ENV_VARS = tuple((var, long) for var, long in (
    ("SALLOC_ACCOUNT", "account"), ("SALLOC_ACCTG_FREQ", "acctg-freq"), ("SALLOC_BELL", "bell"),
    ("SALLOC_BURST_BUFFER", "bb"), ("SALLOC_CLUSTER_CONSTRAINT", "cluster-constraint"),
    ("SALLOC_CLUSTERS", "clusters"), ("SLURM_CLUSTERS", "clusters"),
    ("SALLOC_CONTAINER", "container"), ("SALLOC_CONSTRAINT", "constraint"),
    ("SALLOC_CORE_SPEC", "core-spec"), ("SALLOC_CPU_FREQ_REQ", "cpu-freq"),
    ("SALLOC_CPUS_PER_GPU", "cpus-per-gpu"), ("SALLOC_DEBUG", "verbose"),
    ("SALLOC_DELAY_BOOT", "delay-boot"), ("SALLOC_EXCLUSIVE", "exclusive"),
    ("SALLOC_GPUS", "gpus"), ("SALLOC_GPU_BIND", "gpu-bind"), ("SALLOC_GPU_FREQ", "gpu-freq"),
    ("SALLOC_GPUS_PER_NODE", "gpus-per-node"), ("SALLOC_GPUS_PER_SOCKET", "gpus-per-socket"),
    ("SALLOC_GPUS_PER_TASK", "gpus-per-task"), ("SALLOC_GRES", "gres"),
    ("SALLOC_GRES_FLAGS", "gres-flags"), ("SALLOC_IMMEDIATE", "immediate"),
    ("SALLOC_HINT", "hint"), ("SLURM_HINT", "hint"), ("SALLOC_KILL_CMD", "kill-command"),
    ("SALLOC_MEM_BIND", "mem-bind"), ("SALLOC_MEM_PER_CPU", "mem-per-cpu"),
    ("SALLOC_MEM_PER_GPU", "mem-per-gpu"), ("SALLOC_MEM_PER_NODE", "mem"),
    ("SALLOC_NETWORK", "network"), ("SALLOC_NO_BELL", "no-bell"),
    ("SALLOC_NO_KILL", "no-kill"), ("SALLOC_OVERCOMMIT", "overcommit"),
    ("SALLOC_PARTITION", "partition"), ("SALLOC_POWER", "power"),
    ("SALLOC_PROFILE", "profile"), ("SALLOC_QOS", "qos"), ("SALLOC_REQ_SWITCH", "switches"),
    ("SALLOC_RESERVATION", "reservation"), ("SALLOC_SIGNAL", "signal"),
    ("SALLOC_SPREAD_JOB", "spread-job"), ("SALLOC_THREAD_SPEC", "thread-spec"),
    ("SALLOC_THREADS_PER_CORE", "threads-per-core"), ("SALLOC_TIMELIMIT", "time"),
    ("SALLOC_USE_MIN_NODES", "use-min-nodes"), ("SALLOC_WAIT_ALL_NODES", "wait-all-nodes"),
    ("SALLOC_WCKEY", "wckey"),
))
COMMAND_LINE_ONLY = frozenset({"help", "usage", "version", "server", "key-file", "conf"})


def _usage_error(exc: so.OptionError) -> CliError:
    return CliError(f"{exc} (see {prog('ralloc')} --help)", code=LAUNCHER_USAGE)


def help_text(name: str) -> str:
    from ranch.cli.sbatch_help import help_text

    return help_text(name, OPTIONS, (
        f"Usage: {name} [OPTIONS...] [command [args...]]", "",
        "Allocates nodes, runs the command here (your login shell when none is given) with",
        "the allocation's SLURM_* variables, and releases the nodes when it ends. Options Ranch",
        "acts on (every other salloc 22.05 option is accepted and set aside; SALLOC_*",
        "variables set them too):"))


def usage_text(name: str) -> str:
    return (f"Usage: {name} [-N nnodes] [-n ntasks] [-c ncpus] [--mem=MB] [-p partition]\n"
            f"       [-t time] [-J jobname] [-w hosts] [-x hosts] [-K[signal]] [--no-shell]\n"
            f"       [command [args...]]\n")


def gather(argv: list[str], environ: dict[str, str]) -> tuple[dict, list[str]]:
    """(every option value: the command line's over the SALLOC_* variables', the command)."""
    try:
        cli, rest = so.parse(argv, options=OPTIONS)
        from ranch.cli.sbatch_env import from_environment

        from_env = from_environment(environ, ENV_VARS, OPTIONS)
    except so.OptionError as exc:
        raise _usage_error(exc) from None
    name = prog("ralloc")
    if cli.get("help"):
        sys.stdout.write(help_text(name))
        raise SystemExit(0)
    if cli.get("usage"):
        sys.stdout.write(usage_text(name))
        raise SystemExit(0)
    if cli.get("version"):
        print(version_text("ralloc"))
        raise SystemExit(0)
    values = {**from_env, **cli}
    so.check_ints(values)  # parse_int's refusals (exit 1), before anything is asked
    if values.get("chdir"):  # salloc changes into it first: exit 1 where it cannot
        path = os.path.abspath(str(values["chdir"]))
        if not os.path.isdir(path):
            import errno

            why = os.strerror(errno.ENOTDIR if os.path.exists(path) else errno.ENOENT)
            raise CliError(f"chdir({path}): {why}")
    return values, rest


def seconds(value: object, opt: str, default: int) -> int:
    if value is None or value is True:
        return default
    text = str(value).strip()  # parse_int has refused what is not a number (check_ints)
    if not text.isdigit():
        raise CliError(f"--{opt}={value}: expected a number of seconds",
                       code=LAUNCHER_USAGE)
    return int(text)


def kill_signal(value: object) -> int:
    """-K[SIGNAL]: SIGTERM when no signal is named (salloc's arg_set_kill_command)."""
    from ranch.cli.sbatch_values import signal_number

    if value is None or value is True:
        import signal

        return int(signal.SIGTERM)
    num = signal_number(str(value))
    if num is None:
        raise CliError(f"Invalid --kill-command specification {value!r}",
                       code=LAUNCHER_USAGE)
    return num


def login_shell() -> str:
    """salloc's default command without LaunchParameters=use_interactive_step: the user's
    shell from the password database (then $SHELL, then /bin/sh)."""
    import pwd

    try:
        shell = pwd.getpwuid(os.getuid()).pw_shell
    except KeyError:
        shell = ""
    return shell or os.environ.get("SHELL") or "/bin/sh"


def _ask_cluster_name(target):  # -> protocol.client.RawCall | None
    """The controller's Ping, sent now and read once the allocation runs: one round trip
    fewer before the command starts (SLURM_CLUSTER_NAME needs its answer)."""
    from ranch.cli.credential import signer
    from ranch.protocol.client import RawCall

    try:
        key, munge = signer(target)
        return RawCall((target.host, target.port), key, "Ping", {}, munge=munge)
    except Exception:  # unreachable, no key, munged away: asked again the ordinary way
        return None


def _cluster_name(ping) -> str:  # ping: protocol.client.RawCall
    try:
        kind, reply = ping.reply()
    except Exception:  # as Allocation.cluster_name: no name is no error
        return ""
    finally:
        ping.close()
    return str(reply.get("cluster_name") or "") if kind == "Pong" else ""


def run(argv: list[str]) -> int:
    from ranch.cli import allocation

    environ = dict(os.environ)
    values, command = gather(argv, environ)
    kill = kill_signal(values["kill-command"]) if "kill-command" in values else 0
    immediate = seconds(values["immediate"], "immediate", 1) if "immediate" in values else None
    target = find_target(values.get("server"), values.get("key-file"), values.get("conf"))
    alloc = allocation.Allocation(target, prog("ralloc"), salloc=True,
                                  quiet=bool(values.get("quiet")))
    # salloc names its job for what it runs: "no-shell" when nothing; then nobody holds it and
    # InactiveLimit does not apply (measured on slurmctld 22.05)
    body = allocation.submit_body(values, name="no-shell" if values.get("no-shell")
                                  else "interactive", environ=environ)
    body["held_by"] = "" if values.get("no-shell") else "ralloc"
    if immediate is not None and immediate <= 1:  # -I, -I1: the scheduler's first pass decides
        body["immediate"] = True
    submit_dir = os.getcwd()
    ping = None if values.get("no-shell") else _ask_cluster_name(target)
    record = allocation.allocate(alloc, body, immediate=immediate)
    if values.get("no-shell"):
        return 0  # the allocation stays until its time limit or rcancel, as salloc's does
    from ranch.cli.alloc_env import environment

    cluster = _cluster_name(ping) if ping is not None else alloc.cluster_name()
    env = {**environ, **environment(record, values, cluster, submit_dir)}
    from ranch.cli.alloc_command import run_command

    return run_command(alloc, command or [login_shell()], env, str(body["workdir"]), kill)


def main(argv: list[str] | None = None) -> int:
    from ranch.cli.controller import run_main

    return run_main("ralloc", run, argv)


if __name__ == "__main__":
    sys.exit(main())
