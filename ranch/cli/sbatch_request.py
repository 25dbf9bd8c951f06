"""sbatch's option values turned into a SubmitJob body: units, the per-task and per-GPU forms
resolved into per-node figures, the job's environment, and sbatch's refusals worded as sbatch
words them (the option named)."""

from __future__ import annotations

import os
import time

from ranch.cli.controller import LAUNCHER_USAGE, CliError
from ranch.cli.credential import user_name
from ranch.cli.job_export import check as check_export
from ranch.cli.job_export import exported
from ranch.cli.sbatch_env import slurm_env
from ranch.cli.sbatch_options import arg
from ranch.protocol.limits import MAX_TIME_LIMIT_MINUTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

_UNIT_KIB = {"K": 1, "": 1024, "M": 1024, "G": 1024 ** 2, "T": 1024 ** 3}
MEMORY_OPTIONS = ("mem", "mem-per-cpu", "mem-per-gpu")
# options slurmctld shows apart from unset when given blank (-A '': Account=, not (null)); and
# those whose zero it shows (--mem-per-gpu=0: MemPerTres=gres:gpu:0), by their resolved field
BLANK_SHOWN = ("account", "comment", "constraint", "exclude", "nodelist", "job-name",
               "mem-per-gpu")
_ZERO_SHOWN = {"mem-per-gpu": "mem_per_gpu"}
# the options whose SubmitJob fields cli/sbatch_values.fields fills (loaded only for them)
VALUE_OPTIONS = ("kill-on-invalid-dep", "nice", "mail-type", "open-mode", "signal", "hint",
                 "get-user-env")


def usage(message: str) -> CliError:
    return CliError(message, code=LAUNCHER_USAGE)


def size_mib(text: str, opt: str) -> int:
    """A size with an optional K/M/G/T suffix (M is the default), in MiB, rounded up."""
    digits = text.strip()  # NUMBER[K|M|G|T][B], any case; by hand: re costs rbatch 6 ms
    if digits[-1:] in ("B", "b"):
        digits = digits[:-1]
    unit = digits[-1:].upper()
    if unit in ("K", "M", "G", "T"):
        digits = digits[:-1]
    else:
        unit = ""
    if digits[:1] == "+":  # str_to_mbytes reads it with strtoll: one sign, and never minus
        digits = digits[1:]
    if not digits.isdecimal():
        raise usage(f"--{opt} {text}: invalid size: expected a number with an optional K, M, G "
                    "or T suffix, such as 500M or 4G")
    kib = int(digits) * _UNIT_KIB[unit]
    return max(1, _ceil_div(kib, 1024)) if kib else 0


def _ceil_div(a: int, b: int) -> int:
    """math.ceil(a / b) in integers (exact, and no math module to load)."""
    return -(-a // b)


def count(text: str, opt: str, *, low: int = 1) -> int:
    from ranch.cli.sbatch_options import strtol_whole

    n = strtol_whole(text)  # as parse_int reads it: " 2" and "+2" are 2
    if n is None or n < low:
        raise usage(f"--{opt}={text}: expected a number of {low} or more")
    return n


def gpu_count(text: str, opt: str) -> int:
    """--gpus* [type:]N, --gres gpu[:type]:N (a comma list: its gpu entry)."""
    for item in text.split(","):
        parts = item.strip().split(":")
        if opt == "gres":
            if parts[0] != "gpu":
                continue
            parts = parts[1:] or ["1"]
        n = parts[-1]
        if not n.isdigit():
            raise usage(f"--{opt}={text}: expected a GPU count such as 2 or a100:2")
        return int(n)
    if opt == "gres":
        raise usage(f"--gres={text}: Ranch knows only gpu gres")
    return 0


def node_range(text: str) -> tuple[int, int | None]:
    """-N MIN[-MAX] -> (min, max), as Slurm reads it (sbatch_options.node_count): `-N 2` is
    2-2 (slurmctld then refuses a -w naming more nodes, as Slurm does), a maximum of 0 none
    (None); a minimum of 0 asks for what a job needs at least: one node."""
    from ranch.cli.sbatch_options import node_count

    n_min, n_max = node_count(text)
    n_min = max(n_min, 1)
    return n_min, (max(n_max, n_min) if n_max else None)


def full_dir(chdir: object, cwd: str) -> str:
    """-D as make_full_path writes it: a relative one is the directory, "/" and it (-D '' too),
    unnormalised; not given, the directory itself."""
    if chdir is None:
        return cwd
    return str(chdir) if str(chdir).startswith("/") else f"{cwd}/{chdir}"


def script_path(cmd: str, chdir: object) -> str:
    """The batch script sbatch reads, and shows as Command (opt.c: search_path with -D's
    directory first, then $PATH): a name that is neither ./relative nor /absolute is the first
    existing one of -D/NAME and each PATH entry's NAME; otherwise, or if none exists, as typed
    (measured: -D sub job.sh reads sub/job.sh, -D '' job.sh is d//job.sh)."""
    if not cmd or cmd.startswith((".", "/")):
        return cmd
    cwd = os.getcwd()
    first = full_dir(chdir, cwd)
    for d in [first, *(p for p in os.environ.get("PATH", "").split(":") if p)]:
        full = f"{cwd}/{d}/{cmd}" if d.startswith(".") else f"{d}/{cmd}"
        if os.path.exists(full):
            return full
    return cmd


def check_words(v: dict[str, object]) -> None:
    """The values slurm_opt.c refuses while it reads the command line, refused before the
    script is looked for (`sbatch -N job.sh` is a bad node count, exit 255, not a missing
    script): -N, -t and --begin."""
    if isinstance(v.get("nodes"), str):
        node_range(str(v["nodes"]))
    if isinstance(v.get("time"), str):
        from ranch.conf.timefmt import parse_minutes

        try:
            parse_minutes(str(v["time"]))
        except ValueError:
            raise usage("Invalid --time specification") from None
    if isinstance(v.get("begin"), str):
        _begin(str(v["begin"]))


def time_seconds(text: str) -> int:
    """-t in seconds (already checked by parse_minutes), read as Slurm's time_str2secs."""
    from ranch.conf.timefmt import parse_seconds

    return parse_seconds(text) or 0


def _stream(name: object, workdir: str, *, null: bool = True) -> str:
    """-o/-e/-i as slurmctld keeps it: `none` (any case, -o/-e) is /dev/null (measured:
    StdOut=/dev/null); an empty one given is the working directory and "/" (a relative path
    is made full by prefixing it: `-o ''` names the directory itself, as in Slurm, and the job
    cannot open it); not given, "" (the default)."""
    if name is None:
        return ""
    text = str(name)
    if not text:
        return f"{workdir}/"
    return "/dev/null" if null and text.lower() == "none" else text


def memory_choice(values: dict[str, object], words: Mapping[str, object]) -> None:
    """--mem, --mem-per-cpu and --mem-per-gpu exclude one another (sbatch's rule): two given
    as words (command line or #SBATCH lines) are refused; one such clears the others set by
    variables; two variables are refused."""
    given = [o for o in MEMORY_OPTIONS if o in words]
    if len(given) > 1:
        raise usage("--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.")
    if given:
        for other in MEMORY_OPTIONS:
            if other != given[0]:
                values.pop(other, None)
    elif sum(o in values for o in MEMORY_OPTIONS) > 1:
        raise usage("--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.")


def resources(v: dict[str, object], who: str | None = "rbatch") -> dict[str, object]:
    """Nodes, tasks, CPUs, memory and GPUs per node, with what was asked per task/CPU/GPU kept."""
    out: dict[str, object] = {}
    k = count(arg(v, "ntasks-per-node"), "ntasks-per-node") if "ntasks-per-node" in v else 0
    n_min, n_max = node_range(arg(v, "nodes")) if "nodes" in v else (1, None)
    ntasks = count(arg(v, "ntasks"), "ntasks") if "ntasks" in v else 0
    cpt = count(arg(v, "cpus-per-task"), "cpus-per-task") if "cpus-per-task" in v else 0
    if "nodes" in v and ntasks:  # sbatch's _opt_verify: never more nodes than tasks
        if n_max and ntasks < n_max:
            n_max = ntasks
        if ntasks < n_min:
            if who is not None:  # salloc says it too; rrun's step sizes say it for srun
                import sys

                from ranch.cli.slurm_names import prog

                print(f"{prog(who)}: Warning: can't run {ntasks} processes on {n_min} nodes, "
                      f"setting nnodes to {ntasks}", file=sys.stderr)
            n_min = n_max = ntasks
    # -n without -N spreads the tasks over nodes (max_nodes 0), as in issue 12
    max_nodes: int | None = n_max if "nodes" in v else (0 if ntasks else None)
    if k:
        if not ntasks and (n_max is None or n_max == n_min):
            ntasks = n_min * k  # sbatch: -N n --ntasks-per-node k means n*k tasks
        elif ntasks and "nodes" not in v:
            n_min, max_nodes = _ceil_div(ntasks, k), None  # as many nodes as k per node needs
    ntasks = ntasks or 1
    gpn = 0
    for opt in ("gpus-per-node", "gpus", "gres"):
        if opt in v:
            gpn = gpu_count(arg(v, opt), opt)
            break
    gpt = gpu_count(arg(v, "gpus-per-task"), "gpus-per-task") if "gpus-per-task" in v else 0
    tasks_per_node = k or _ceil_div(ntasks, n_min)
    if gpt:  # -n without -N still spreads: rctld counts each task's GPUs (gpus_per_task)
        gpn = gpt * tasks_per_node
    cpg = count(arg(v, "cpus-per-gpu"), "cpus-per-gpu") if "cpus-per-gpu" in v else 0
    if cpg and not cpt:
        cpt = cpg * gpt if gpt else max(1, _ceil_div(cpg * gpn, tasks_per_node))
    cpt = cpt or 1
    mem = 0
    if "mem" in v:
        mem = size_mib(arg(v, "mem"), "mem")
    elif "mem-per-cpu" in v:
        out["mem_per_cpu"] = per_cpu = size_mib(arg(v, "mem-per-cpu"), "mem-per-cpu")
        mem = per_cpu * tasks_per_node * cpt
    elif "mem-per-gpu" in v:
        out["mem_per_gpu"] = per_gpu = size_mib(arg(v, "mem-per-gpu"), "mem-per-gpu")
        mem = per_gpu * gpn
    out.update(num_nodes=n_min, max_nodes=max_nodes, ntasks=ntasks, cpus_per_task=cpt,
               mem_mib=mem, gpus=gpn, ntasks_per_node=k, gpus_per_task=gpt, cpus_per_gpu=cpg)
    return out


def body(v: dict[str, object], script: str, command: str, argv: list[str],
         environ: Mapping[str, str], who: str | None = "rbatch") -> dict[str, object]:
    """The SubmitJob body (the codec's shape) for option values `v` (long name -> value);
    `who` says resources()'s warning (None: not at all)."""
    res = resources(v, who)
    limit, seconds = _time_limit(v)
    workdir = full_dir(v.get("chdir"), os.getcwd())
    whole, oversub = _sharing(v)
    export = v.get("export")
    if export is not None and (why := check_export(str(export))):
        raise usage(why)
    before, after = slurm_env(v, res)
    env = exported(None if export is None else str(export), {**environ, **before})
    env.update(after)
    out: dict[str, object] = {
        **_who_and_files(v, script, workdir, argv, env),
        "begin_time": _begin(arg(v, "begin")) if v.get("begin") is not None else None,
        "partition": _partitions(v.get("partition")),
        "nodelist": v.get("nodelist") or "",
        "exclude": v.get("exclude") or "",
        "time_limit": limit,
        "time_limit_s": seconds,
        "requeue": v.get("requeue", True) is not False,
        "exclusive": whole,
        "oversubscribe": oversub,
        "array": _array(v.get("array")),
        "hold": bool(v.get("hold")),
        "submit_host": os.uname().nodename,
        "command": command,
        **_kept(v, res, export),
        **res,
    }
    if any(o in v for o in VALUE_OPTIONS):
        from ranch.cli import sbatch_values  # off the everyday path: rbatch's import budget

        out.update(sbatch_values.fields(v))
    if v.get("time") is None:
        del out["time_limit"]  # the partition's DefaultTime
        del out["time_limit_s"]
    return out


def _time_limit(v: dict[str, object]) -> tuple[int | None, int | None]:
    """-t as (minutes, seconds); (None, None) for none given or 0 (no limit, as sbatch reads
    it)."""
    from ranch.conf.timefmt import parse_minutes

    limit = seconds = None
    if v.get("time") is not None:
        try:
            limit = parse_minutes(arg(v, "time"))
        except ValueError as exc:
            raise usage(f"--time: {exc}") from None
        if limit is not None and limit < 0:
            raise usage(f"--time: invalid time {v['time']!r}: a negative time")
        if limit is not None and limit > MAX_TIME_LIMIT_MINUTES:
            raise usage(f"--time {v['time']}: {limit:,} minutes is above the largest time "
                        f"limit, {MAX_TIME_LIMIT_MINUTES:,} minutes")
        seconds = time_seconds(arg(v, "time")) if limit is not None else None
        if not seconds:  # 0: no limit, as sbatch reads it
            limit = seconds = None
    return limit, seconds


def _sharing(v: dict[str, object]) -> tuple[bool, str]:
    """(whole nodes, OverSubscribe) of --exclusive and --oversubscribe."""
    whole, oversub = False, ""
    if "exclusive" in v:
        from ranch.cli.sbatch_values import exclusive

        whole, oversub = exclusive(v["exclusive"])
    if v.get("oversubscribe") and not oversub:
        oversub = "YES"
    return whole, oversub


def _who_and_files(v: dict[str, object], script: str, workdir: str, argv: list[str],
                   env: dict[str, str]) -> dict[str, object]:
    """The body's first fields: the script, who submits it, where it runs, its environment and
    its files."""
    return {
        "script": script,
        "user": user_name(),
        "uid": os.getuid(),
        "gid": os.getgid(),
        **(_as_user(str(v["uid"])) if v.get("uid") else {}),  # sbatch --uid (root only)
        "workdir": workdir,
        "name": v.get("job-name") or "",
        "argv": argv,
        "env": sorted(env.items()),
        "stdout": _stream(v.get("output"), workdir),
        "stderr": _stream(v.get("error"), workdir),
        "input": _stream(v.get("input"), workdir, null=False),
    }


def _kept(v: dict[str, object], res: dict[str, object], export: object) -> dict[str, object]:
    """The fields kept and shown as given (account and wckey lowercased, as slurmctld does)."""
    return {
        "account": arg(v, "account").lower(),  # slurmctld lowercases both
        "wckey": arg(v, "wckey").lower(),
        "qos": v.get("qos") or "",
        "reservation": arg(v, "reservation"),
        "comment": v.get("comment") or "",
        "constraint": arg(v, "constraint").strip(),
        "dependency": arg(v, "dependency").strip(),
        "mail_user": v.get("mail-user") or "",
        "export": "" if export is None else str(export),
        "test_only": bool(v.get("test-only")),
        "ntasks_given": "ntasks" in v or "ntasks-per-node" in v,
        "given_blank": tuple(o for o in BLANK_SHOWN if v.get(o) == "" or (
            o in _ZERO_SHOWN and o in v and not res.get(_ZERO_SHOWN[o]))),
    }


def _array(text: object) -> str:
    if not text:
        return ""
    from ranch.cli.sbatch_script import array_spec

    return array_spec(str(text))


def _partitions(text: object) -> str:
    """-p: the partition list as slurmctld reads it (a name given twice is one), "" for the
    default; an empty -p= names none, and slurmctld refuses it."""
    if text is None:
        return ""
    names = [p for p in str(text).split(",") if p]
    if not names:
        raise CliError("Invalid partition name specified: (null)")  # slurmctld's, exit 1
    return ",".join(dict.fromkeys(names))


def _begin(text: str) -> float:
    from ranch.cli.begin_time import BeginError, parse_begin

    try:
        return parse_begin(text, time.time())
    except BeginError as exc:
        raise usage(str(exc)) from None


def _as_user(text: str) -> dict[str, object]:
    """sbatch --uid=USER: root submits the job as USER (a name or a number)."""
    import pwd

    if os.getuid() != 0:
        raise usage("--uid only permitted by root user")
    try:
        pw = pwd.getpwuid(int(text)) if text.isdigit() else pwd.getpwnam(text)
    except (KeyError, OverflowError):
        raise usage(f"--uid=\"{text}\" invalid") from None
    return {"user": pw.pw_name, "uid": pw.pw_uid, "gid": pw.pw_gid}
