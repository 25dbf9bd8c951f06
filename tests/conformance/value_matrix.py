"""The value matrix's run and comparison: every case (value_cases.py) on a private Slurm and on
Ranch, each case's exit status and the meaning of its first error line classified, its
resulting fields (`scontrol show job` of a held sbatch job) or its output (a format token)
compared; every disagreement is either one value_differences.py lists with its reason or a
failure."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.conformance.value_cases import Case

# getopt_long's and argparse's words for a command line they cannot read
_USAGE = re.compile(r"unrecognized option|invalid option|requires an argument|doesn't allow an "
                    r"argument|is ambiguous|unrecognized arguments|expected one argument|"
                    r"ignored explicit argument|not allowed with argument|Try \"\S+ --help\"")
# the controller's answer to a command line that was read and sent
_CONTROLLER = re.compile(r"Unable to confirm allocation|Unable to allocate resources|"
                         r"Job submit/allocate failed|Batch job submission failed|"
                         r"Invalid job id specified|Kill job error|accounting_storage|"
                         r"Requested node configuration|Invalid partition")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?")
# `scontrol show job` keys whose value is each system's own (ids, clocks, where it was asked)
UNCOMPARED_KEYS = frozenset({"JobId", "SubmitTime", "EligibleTime", "AccrueTime", "StartTime",
                             "EndTime", "LastSchedEval", "AllocNode:Sid", "Priority", "RunTime"})
Result = tuple[int, str, str]  # exit status, stdout, stderr


def classify(result: Result) -> str:
    """accepted, refused-usage (the command line), refused-value (a value the command's own
    parser refused) or refused-controller (read and sent, refused by the controller)."""
    rc, _out, err = result
    if rc == 0:
        return "accepted"
    if _USAGE.search(err):
        return "refused-usage"
    if _CONTROLLER.search(err):
        return "refused-controller"
    return "refused-value"


def first_error(result: Result) -> str:
    lines = [ln for ln in result[2].splitlines() if ln.strip()]
    return lines[0] if lines else ""


@dataclass
class Side:
    """One system's answers: each case's result, and each held job's `scontrol show job`."""

    results: list[Result] = field(default_factory=list)
    jobs: dict[int, dict[str, str]] = field(default_factory=dict)
    workdir: str = ""
    base: int = 0


def parse_records(text: str) -> dict[int, dict[str, str]]:
    """`scontrol -o show job`'s lines as {job id: {key: value}} (values may hold spaces only
    where the key is the last one written that way: Command, WorkDir and paths do not)."""
    out: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        rec: dict[str, str] = {}
        for word in re.split(r" (?=[A-Za-z/:_]+=)", line.strip()):
            key, _, value = word.partition("=")
            rec[key] = value
        if rec.get("JobId", "").isdigit():
            out[int(rec["JobId"])] = rec
    return out


def submitted_id(result: Result) -> int | None:
    m = re.search(r"(?:Submitted batch job |^)(\d+)\s*$", result[1].strip())
    return int(m.group(1)) if m and result[0] == 0 else None


def normal(text: str, side: Side, ids: dict[int, int] | None = None) -> str:
    """`text` with the work directory and timestamps as placeholders, and (Ranch's side) its job
    ids as Slurm's for the same case (`ids`), so that equal numbers elsewhere stay as they are."""
    text = text.replace(side.workdir, "<dir>")
    text = _TIME.sub("<time>", text)
    for mine, theirs in (ids or {}).items():
        if mine != theirs:
            text = re.sub(rf"(?<!\d){mine}(?!\d)", str(theirs), text)  # job.sh_12_4 too
    return text


def same_text(slurm_text: str, slurm: Side, ranch_text: str, ranch: Side,
              ids: dict[int, int]) -> tuple[str, str]:
    """Both sides' text as compared: Ranch's job ids become Slurm's only where the texts differ
    without that, since a job id may equal a value of the case (Ranch's job 100 made by
    --cpus-per-task=100 would otherwise show NumCPUs as Slurm's id for that case)."""
    ns = normal(slurm_text, slurm)
    plain = normal(ranch_text, ranch)
    return (ns, plain) if plain == ns else (ns, normal(ranch_text, ranch, ids))


def _with_base(argv: tuple[str, ...], base: int) -> list[str]:
    return [w.replace("{base}", str(base)) for w in argv]


def run_slurm(slurm, cases: list[Case], workdir: Path, base: int) -> list[Result]:
    env = slurm.env()

    def one(case: Case) -> Result:
        argv = _with_base(case.argv, base)
        try:
            done = subprocess.run(slurm.argv(*argv), cwd=workdir, env=env, capture_output=True,
                                  text=True, timeout=30, stdin=subprocess.DEVNULL)
            return done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired:
            return -1, "", "TIMEOUT"

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, cases))


def run_ranch(ranch, cases: list[Case], workdir: Path, base: int, workers: int = 2
              ) -> list[Result]:
    """Ranch's answers: `workers` worker processes (value_worker.py), each a share of the
    cases in order."""
    argvs = [_with_base(c.argv, base) for c in cases]
    chunks = [argvs[i::workers] for i in range(workers)]
    tmp = Path(tempfile.mkdtemp(prefix="ranch-matrix-", dir=workdir))
    procs = []
    for i, chunk in enumerate(chunks):
        (tmp / f"cases{i}.json").write_text(json.dumps(chunk))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tests.conformance.value_worker", str(tmp / f"cases{i}.json"),
             str(tmp / f"results{i}.json")], cwd=workdir, env=ranch.env(),
            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=900)
        if p.returncode != 0:
            raise AssertionError(f"value_worker failed: {err[-2000:]}")
    parts = [json.loads((tmp / f"results{i}.json").read_text()) for i in range(workers)]
    out: list[Result] = [(0, "", "")] * len(argvs)
    for i, part in enumerate(parts):
        for j, res in enumerate(part):
            out[i + j * workers] = tuple(res)  # type: ignore[assignment]
    return out


def run_side(system, cases: list[Case], runner) -> Side:
    """Every case on one system: the held base job first (`{base}`), the cases, then every
    job's record."""
    workdir = Path(system.workdir) / "matrix"
    (workdir / "sub").mkdir(parents=True, exist_ok=True)
    (workdir / "job.sh").write_text("#!/bin/sh\ntrue\n")
    side = Side(workdir=str(workdir))
    done = system_run(system, workdir, "sbatch", "-H", "-J", "base", "job.sh")
    side.base = int(done.stdout.split()[-1])
    side.results = runner(system, cases, workdir, side.base)
    shown = system_run(system, workdir, "scontrol", "-o", "show", "job")
    side.jobs = parse_records(shown.stdout)
    return side


def system_run(system, workdir: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(system.argv(*argv), cwd=workdir, env=system.env(), capture_output=True,
                          text=True, timeout=120)


def canonical(key: str, value: str) -> str:
    """A field as the conformance suite compares it (README "Deliberate differences"): TRES
    without mem= (this Slurm runs CR_CPU, where memory is not consumed); node lists as
    written."""
    if key == "TRES":
        return re.sub(r"mem=[^,]*,?", "", value)
    return value


@dataclass(frozen=True)
class Disagreement:
    case: Case
    what: str  # "class", "exit", "output" or "field KEY"
    slurm: str
    ranch: str

    def __str__(self) -> str:
        return f"{self.case.key}: {self.what}: slurm {self.slurm!r} / ranch {self.ranch!r}"


def compare(cases: list[Case], slurm: Side, ranch: Side) -> list[Disagreement]:
    out: list[Disagreement] = []
    base_s = slurm.jobs.get(slurm.base, {})
    for case, rs, rr in zip(cases, slurm.results, ranch.results, strict=True):
        cs, cr = classify(rs), classify(rr)
        if cs != cr:
            out.append(Disagreement(case, "class", f"{cs}: {first_error(rs)}",
                                    f"{cr}: {first_error(rr)}"))
            continue
        if rs[0] != rr[0]:
            out.append(Disagreement(case, "exit", str(rs[0]), str(rr[0])))
            continue
        if case.compare_output and rs[0] == 0:
            ns, nr = same_text(rs[1], slurm, rr[1], ranch, {ranch.base: slurm.base})
            if ns != nr:
                out.append(Disagreement(case, "output", ns[-300:], nr[-300:]))
            continue
        if case.command == "sbatch" and rs[0] == 0:
            js, jr = submitted_id(rs), submitted_id(rr)
            rec_s, rec_r = slurm.jobs.get(js or -1), ranch.jobs.get(jr or -1)
            if rec_s is None or rec_r is None:
                continue  # --test-only, --help: no job
            for key, value in rec_s.items():
                if key in UNCOMPARED_KEYS or base_s.get(key) == value:
                    continue
                vs, vr = same_text(value, slurm, rec_r.get(key, "<absent>"), ranch,
                                   {jr or 0: js or 0})
                vs, vr = canonical(key, vs), canonical(key, vr)
                if vs != vr:
                    out.append(Disagreement(case, f"field {key}", vs, vr))
    return out


def run_matrix(slurm, ranch, cases: list[Case]) -> tuple[Side, Side]:
    with ThreadPoolExecutor(2) as pool:
        fs = pool.submit(run_side, slurm, cases, run_slurm)
        fr = pool.submit(run_side, ranch, cases, run_ranch)
        return fs.result(), fr.result()

