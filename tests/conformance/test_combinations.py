"""Options as users combine them, on real Slurm 22.05 and on Ranch: where the options are
given (command line, #SBATCH lines, #PBS lines) x the layout x memory x arrays x the submitter's
environment (an exported bash function as Lmod exports `module`, --export lists, -A), each
job running the launch idioms scripts use (`srun hostname`, `scontrol show hostnames`,
SLURM_TASKS_PER_NODE, `module`). The rows are all-pairs over those factors (pairwise.py,
seeded: RANCH_COMBO_SEED=fresh tries new ones). Compared per job (each array task): sbatch's
exit status, the SLURM_* names set and their values, and what each idiom printed.

Two things are normalised, as in the rest of the suite: job ids and hostlists (expanded), and
which node took the larger share of an uneven layout (the nodes' counts are compared sorted:
each scheduler places jobs its own way, and the other jobs running meanwhile decide it)."""

from __future__ import annotations

import random
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ranch.conf import hostlist
from tests.conformance.conftest import start_slurm
from tests.conformance.pairwise import all_pairs, seed
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE

SEED = seed()
FACTORS: dict[str, list[tuple[str, ...]]] = {
    "layout": [(), ("-N", "2", "-n", "3"), ("-n", "2"), ("-N", "2"), ("--exclusive", "-n", "1"),
               ("-N", "2", "--ntasks-per-node=1")],
    "where": [("cli",), ("sbatch",), ("pbs",)],
    "memory": [(), ("--mem=100M",), ("--mem-per-cpu=50M",)],
    "array": [(), ("--array=1-3:2",), ("--array=[2-3]",)],
    "env": [(), ("bash-function",), ("--export=ALL,FOO=bar",), ("-A", "Acc1")],
}
# what #PBS says for an sbatch option (sbatch 22.05's _set_pbs_options), where it has a word
PBS = {"--mem=100M": "-l mem=100mb", "--array=1-3:2": "-t 1-3:2", "--array=[2-3]": "-J [2-3]",
       "-A Acc1": "-A Acc1", "--export=ALL,FOO=bar": "-v ALL,FOO=bar"}
# the names compared by value (the rest by presence): ids and the node's own name differ
VALUES = ("SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX",
          "SLURM_ARRAY_TASK_STEP", "SLURM_ARRAY_TASK_ID", "SLURM_NTASKS", "SLURM_NPROCS",
          "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_ACCOUNT", "SLURM_MEM_PER_NODE",
          "SLURM_MEM_PER_CPU", "SLURM_CPUS_PER_TASK", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_NAME",
          "SLURM_JOB_PARTITION", "SLURM_EXPORT_ENV", "FOO")
PER_NODE = ("SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE")
# Slurm's plumbing, and names the rest of the suite leaves out (test_environment.NOT_COMPARED)
NOT_COMPARED = frozenset({"SLURM_CONF", "SLURM_WORKING_CLUSTER"})
BODY = """\
t=${SLURM_ARRAY_TASK_ID:-0}
env -0 > env-$t
scontrol show hostnames > hostnames-$t 2>&1
srun hostname 2> srun-err-$t | sort > srun-$t
(type module >/dev/null 2>&1 && module) > module-$t 2>&1
echo "$SLURM_TASKS_PER_NODE" > tpn-$t
echo done > done-$t
"""
MODULE_FUNCTION = "module() { echo module-ran \"$@\"; }; export -f module; "


def scenario(row: dict[str, int]) -> dict[str, object]:
    """One row's submission: its options, where they go, the script, the shell around it."""
    chosen = {name: FACTORS[name][i] for name, i in row.items()}
    where = chosen["where"][0]
    words = [*chosen["layout"], *chosen["memory"], *chosen["array"]]
    env = chosen["env"]
    shell = MODULE_FUNCTION if env == ("bash-function",) else ""
    if env and env != ("bash-function",):
        words += list(env)
    cli: list[str] = []
    lines: list[str] = []
    for opt in _options(words):
        text = " ".join(opt)
        if where == "pbs" and text in PBS:
            lines.append(f"#PBS {PBS[text]}")
        elif where in ("sbatch", "pbs"):
            lines.append(f"#SBATCH {text}")
        else:
            cli += opt
    script = "#!/bin/bash\n" + "".join(line + "\n" for line in lines) + BODY
    tasks = {"--array=1-3:2": ["1", "3"], "--array=[2-3]": ["2", "3"]}.get(
        "".join(chosen["array"]), ["0"])
    name = " ".join(f"{k}={' '.join(v) or '-'}" for k, v in chosen.items())
    return {"name": name, "cli": cli, "script": script, "shell": shell, "tasks": tasks}


def _options(words: list[str]) -> list[list[str]]:
    """Words grouped as options: `-N 2` stays one option, `--mem=1M` is one."""
    out: list[list[str]] = []
    for w in words:
        if out and not w.startswith("-"):
            out[-1].append(w)
        else:
            out.append([w])
    return out


SCENARIOS = [scenario(row) for row in all_pairs(FACTORS, random.Random(SEED))]


# srun's "step creation temporarily disabled, retrying" and "Step created" lines depend on
# whether the controller has heard of the previous step's end yet (a loaded machine: Slurm's
# own srun met it), not on the layout compared: they are left out, every other line is kept
RETRIES = "grep -v -e 'step creation temporarily disabled' -e 'Step created for job'"
UNEVEN = f"""#!/bin/sh
echo "$SLURM_JOB_CPUS_PER_NODE $SLURM_TASKS_PER_NODE" > layout
srun hostname 2>&1 | {RETRIES} | wc -l > srun
srun -l printenv SLURM_STEP_TASKS_PER_NODE 2>&1 | {RETRIES} | sort > step
echo done > done-0
"""


def busy_then_uneven(system, top: Path) -> Path:
    """A one-CPU job on c1, then (once it runs) `-N 2 -n 3`: its layout is 1 CPU on c1 and 2
    on c2 on both systems, so srun's default step must lay its tasks out over that."""
    d = top / "uneven"
    d.mkdir(parents=True)
    (d / "job.sh").write_text(UNEVEN)
    held = _by_name(system, "sbatch", "-w", "c1", "-n", "1", "-o", "/dev/null", "--wrap",
                    "sleep 6")
    first = held.stdout.split()[-1]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _by_name(
            system, "squeue", "-h", "-j", first, "-o", "%t").stdout.strip() != "R":
        time.sleep(0.2)
    subprocess.run(system.argv("sbatch", "-N", "2", "-n", "3", "job.sh"), cwd=d,
                   env=system.env(), capture_output=True, text=True, timeout=60)
    return d


def run_all(system, top: Path) -> dict[str, dict[str, object]]:
    """Every scenario submitted on `system`, each from its own directory; then waited for
    until every task wrote its `done` file (or the deadline)."""
    env = system.env()
    out: dict[str, dict[str, object]] = {}
    uneven = busy_then_uneven(system, top)
    out["uneven beside a busy node"] = {"rc": 0, "err": "", "dir": uneven, "job": 0}
    for i, sc in enumerate(SCENARIOS):
        d = top / f"s{i}"
        d.mkdir(parents=True)
        (d / "job.sh").write_text(str(sc["script"]))
        cmd = [*system.argv("sbatch"), *sc["cli"], "job.sh"]  # type: ignore[misc]
        done = subprocess.run(["bash", "-c", f"{sc['shell']}exec {shlex.join(cmd)}"], cwd=d,
                              env=env, capture_output=True, text=True, timeout=60)
        m = re.search(r"Submitted batch job (\d+)", done.stdout)
        out[str(sc["name"])] = {"rc": done.returncode, "err": done.stderr, "dir": d,
                                "job": int(m.group(1)) if m else 0}
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        if (uneven / "done-0").exists() and all(
                not r["job"] or all((Path(str(r["dir"])) / f"done-{t}").exists()
                                    for t in sc["tasks"])  # type: ignore[attr-defined]
                for sc, r in zip(SCENARIOS, list(out.values())[1:], strict=True)):
            break
        time.sleep(0.5)
    # once every job ended: its record (what it held stays shown after it ended)
    ids = {str(r["job"]) for r in out.values() if r["job"]}
    while time.monotonic() < deadline and ids & set(
            _by_name(system, "squeue", "-h", "-o", "%A").stdout.split()):
        time.sleep(0.5)
    for sc, r in zip(SCENARIOS, list(out.values())[1:], strict=True):
        if r["job"] and sc["tasks"] == ["0"]:  # arrays: each system lists its tasks its way
            shown = _by_name(system, "scontrol", "-o", "show", "job", str(r["job"])).stdout
            r["record"] = dict(re.findall(r"\b(NumCPUs|NumNodes|NumTasks|JobState)=(\S+)",
                                          shown))
    return out


# Single submissions (held, never run) whose sbatch answer and job record are compared: script
# forms and option values the rows above do not reach
HELD: list[tuple[str, str, tuple[str, ...]]] = [
    ("dos line breaks", "#!/bin/sh\r\n#SBATCH -J dos\r\ntrue\r\n", ()),
    ("directive after a blank", "#!/bin/sh\n #SBATCH -J lead\n#SBATCH-J nospace\ntrue\n", ()),
    ("pbs over sbatch", "#!/bin/sh\n#SBATCH -J sb\n#PBS -N pbsname\n#PBS -l walltime=10:00\n"
     "#PBS -l nodes=2:ppn=1\n#PBS -m be\n#PBS -M x@y\ntrue\n", ()),
    ("array in brackets", "#!/bin/sh\ntrue\n", ("--array=[1-3]",)),
    ("array with empty elements", "#!/bin/sh\ntrue\n", ("--array=1,,4",)),
    ("array bad word", "#!/bin/sh\ntrue\n", ("--array=x",)),
    ("array bad step", "#!/bin/sh\ntrue\n", ("--array=1:2",)),
    ("array backwards", "#!/bin/sh\ntrue\n", ("--array=3-1",)),
    ("array too big", "#!/bin/sh\ntrue\n", ("--array=99999999",)),
    ("export none with a variable", "#!/bin/sh\ntrue\n", ("--export=NONE,FOO=z",)),
]
HELD_KEYS = ("JobName", "ArrayTaskId", "TimeLimit", "NumNodes", "NumTasks", "MailType",
             "MailUser")


def _by_name(system, *argv: str) -> subprocess.CompletedProcess:
    """A command by Slurm's name, found on the system's PATH (Ranch's: its shims), so that
    its messages name it as a user sees them."""
    env = system.env()
    program = shutil.which(argv[0], path=env["PATH"]) or argv[0]
    return subprocess.run([program, *argv[1:]], env=env, capture_output=True, text=True,
                          timeout=60, cwd=system.workdir)


def _task_ids(text: str) -> list[int]:
    """Every ArrayTaskId of the records shown (Slurm folds a pending array into one record,
    `1-3` or `1,4`; Ranch lists its tasks)."""
    ids: set[int] = set()
    for value in re.findall(r"ArrayTaskId=(\S+)", text):
        for part in value.split("%")[0].split(","):
            first, _, last = part.partition("-")
            if first.isdigit():
                ids.update(range(int(first), int(last or first) + 1))
    return sorted(ids)


def run_held(system, top: Path) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for i, (name, text, args) in enumerate(HELD):
        d = top / f"h{i}"
        d.mkdir(parents=True)
        (d / "job.sh").write_text(text)
        done = _by_name(system, "sbatch", "-H", *args, str(d / "job.sh"))
        m = re.search(r"Submitted batch job (\d+)", done.stdout)
        record: dict[str, object] = {}
        if m:
            shown = _by_name(system, "scontrol", "-o", "show", "job", m.group(1)).stdout
            first = shown.splitlines()[0] if shown else ""
            for word in re.split(r"\s+(?=[A-Za-z/:_]+=)", first.strip()):
                key, _, value = word.partition("=")
                record[key] = value.strip()
            record["ArrayTaskId"] = _task_ids(shown)
        out[name] = {"rc": done.returncode, "err": done.stderr,
                     **{k: record.get(k, "<absent>") for k in HELD_KEYS}}
    # outside a job (no SLURM_NODELIST): an error line under scontrol's own name, exit 0
    done = _by_name(system, "scontrol", "show", "hostnames")
    out["scontrol show hostnames outside a job"] = {"rc": done.returncode, "out": done.stdout,
                                                    "err": done.stderr}
    return out


@pytest.fixture(scope="module")
def both() -> dict[str, dict[str, dict[str, object]]]:
    slurm = start_slurm()
    try:
        with RanchCluster(SHAPE) as ranch:
            got = {}
            for system in (slurm, ranch):
                got[system.name] = run_all(system, Path(system.workdir) / "combos")
                got[system.name + " held"] = run_held(system, Path(system.workdir) / "held")
            # read every file before the clusters (and their directories) go
            for result in (got["slurm"], got["ranch"]):
                for r in result.values():
                    d = Path(str(r["dir"]))
                    r["files"] = {p.name: p.read_text(errors="replace")
                                  for p in d.iterdir() if p.is_file()}
    finally:
        slurm.stop()
    return got


def _env(text: str) -> dict[str, str]:
    env = {}
    for item in text.split("\0"):
        name, sep, value = item.partition("=")
        if sep and name:
            env[name] = value
    return env


def _counts(value: str) -> list[int]:
    """`2(x2),1` as [2, 2, 1], sorted: which node got more is placement, not layout."""
    out: list[int] = []
    for part in value.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part)
        if not m:
            return [-1]
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return sorted(out)


def view(r: dict[str, object], tasks: list[str]) -> dict[str, object]:
    """What one system's job showed, normalised for comparing."""
    files: dict[str, str] = r.get("files", {})  # type: ignore[assignment]
    out: dict[str, object] = {"rc": r["rc"], "record": r.get("record")}
    for t in tasks:
        env = _env(files.get(f"env-{t}", ""))
        names = sorted(n for n in env if n.startswith("SLURM") and n not in NOT_COMPARED)
        out[f"{t} names"] = names
        out[f"{t} module function"] = "BASH_FUNC_module%%" in env
        for n in VALUES:
            out[f"{t} ${n}"] = env.get(n, "<absent>")
        for n in PER_NODE:
            out[f"{t} ${n}"] = _counts(env[n]) if n in env else "<absent>"
        nodes = env.get("SLURM_JOB_NODELIST", "")
        expanded = hostlist.expand(nodes) if nodes else []
        out[f"{t} nodes"] = len(expanded)
        shown = files.get(f"hostnames-{t}", "").split()
        # the names scontrol listed are the job's nodes (which ones: placement)
        out[f"{t} scontrol show hostnames"] = (len(shown), shown == expanded)
        out[f"{t} srun hostname"] = files.get(f"srun-{t}", "")
        out[f"{t} srun errors"] = files.get(f"srun-err-{t}", "")
        out[f"{t} module"] = files.get(f"module-{t}", "")
        out[f"{t} tasks per node"] = _counts(files.get(f"tpn-{t}", "").strip() or "x")
    return out


@pytest.mark.parametrize("index", range(len(SCENARIOS)),
                         ids=[str(s["name"]) for s in SCENARIOS])
def test_combination(both, index: int) -> None:
    sc = SCENARIOS[index]
    name = str(sc["name"])
    tasks: list[str] = sc["tasks"]  # type: ignore[assignment]
    want = view(both["slurm"][name], tasks)
    got = view(both["ranch"][name], tasks)
    if want["rc"] == 0:  # nothing compares as equal because both left nothing
        assert all(want[f"{t} names"] for t in tasks), f"Slurm's job left no environment: {name}"
        assert tasks != ["0"] or want["record"], f"Slurm showed no record: {name}"
    diff = {k: (want[k], got.get(k)) for k in want if want[k] != got.get(k)}
    assert not diff, (f"seed {SEED} (RANCH_COMBO_SEED), {name}: (Slurm, Ranch) differ in "
                      f"{diff}\nscript:\n{sc['script']}\nslurm stderr: "
                      f"{both['slurm'][name]['err']}\nranch stderr: {both['ranch'][name]['err']}")


@pytest.mark.parametrize("name", [*(h[0] for h in HELD), "scontrol show hostnames outside a job"])
def test_held(both, name: str) -> None:
    want, got = both["slurm held"][name], both["ranch held"][name]
    assert got == want, f"{name}: Slurm {want}, Ranch {got}"


def test_uneven_layout_beside_a_busy_node(both) -> None:
    """`-N 2 -n 3` placed beside a one-CPU job on c1: 1 CPU there, 2 on c2 (not 2 on each),
    and `srun` with no options lays 3 tasks over them as srun does."""
    name = "uneven beside a busy node"
    want, got = both["slurm"][name]["files"], both["ranch"][name]["files"]
    assert want["layout"] == "1,2 1,2\n"  # the scenario did what it meant to, on Slurm
    assert {k: got.get(k) for k in ("layout", "srun", "step")} == {
        k: want.get(k) for k in ("layout", "srun", "step")}


def test_all_pairs_are_covered() -> None:
    """The generator's promise, for the seed in use: every pair of levels of two factors is
    in some row, in fewer rows than the full product."""
    rows = all_pairs(FACTORS, random.Random(SEED))
    names = list(FACTORS)
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            held = {(r[names[a]], r[names[b]]) for r in rows}
            assert len(held) == len(FACTORS[names[a]]) * len(FACTORS[names[b]])
    full = 1
    for levels in FACTORS.values():
        full *= len(levels)
    assert len(rows) < full
