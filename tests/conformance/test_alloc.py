"""Allocations outside a batch job against Slurm 22.05: `salloc` and `srun` outside a job on a
private Slurm, and Ranch's ralloc and rrun under those names (the shims), the same command lines
on clusters of the same shape (tests/conformance/alloc_runner.py). Compared: exit codes, the
SLURM_* environment salloc gives its command, salloc's stderr lines (granted, relinquished,
queued, -I's refusals, revoked under a running command), and the job's `scontrol show job`
fields once it ended."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from tests.conformance.alloc_runner import Run, run_both
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.runner import normalise
from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_missing

INACTIVE_LIMIT = 10  # seconds; Slurm judges it every 30 s
# scontrol show job keys compared for every allocation (the rest are test_show_job.py's)
KEYS = ("JobName", "JobState", "Reason", "ExitCode", "BatchFlag", "NodeList", "NumNodes",
        "NumCPUs", "NumTasks", "Command", "AccrueTime")
# (scenario, field) -> why Ranch differs: an xfail(strict=True) each, gone when fixed
GAPS: dict[tuple[str, str], str] = {}
SALLOC = ("salloc env", "salloc exit 3", "revoked", "no-shell", "-I", "-I2", "salloc waits")
SRUN = ("srun hostname", "srun kill -9", "srun exit 137")
KILLED = ("salloc killed pending", "srun killed pending", "salloc killed", "srun killed")
ENDED = (*SALLOC, *SRUN, "srun waits", *KILLED)


def _unavailable(reason: str) -> None:
    if os.environ.get("RANCH_REQUIRE_SLURM") == "1":
        pytest.fail(f"RANCH_REQUIRE_SLURM=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, dict[str, Run]]]:
    """Both clusters, every scenario, both gone before the first comparison (30-60 s: Slurm
    ends a killed salloc's job at its first InactiveLimit look, every 30 s from its start)."""
    reason = slurm_missing()
    if reason:
        _unavailable(reason)
    shape = attrs.evolve(SHAPE, inactive_limit=INACTIVE_LIMIT)
    for attempt in range(3):  # a free port picked for it may be taken before it binds it
        slurm = SlurmCluster(shape)
        try:
            slurm.start()
            break
        except SlurmUnavailable as exc:
            slurm.stop()
            if attempt == 2 or "Address already in use" not in str(exc):
                _unavailable(f"a private Slurm could not start: {exc}")
    began = time.monotonic()
    try:
        with RanchCluster(shape) as ranch:
            found = run_both(slurm, ranch)
            found["workdirs"] = {"slurm": slurm.workdir, "ranch": ranch.workdir}  # type: ignore
    finally:
        slurm.stop()
    print(f"allocation scenarios on both systems: {time.monotonic() - began:.1f} s")
    yield found


def pair(runs: dict, scenario: str) -> tuple[Run, Run]:
    return runs["slurm"][scenario], runs["ranch"][scenario]


def param(scenario: str, field: str):
    reason = GAPS.get((scenario, field))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(scenario, field, marks=marks, id=f"{scenario}|{field}")


def lines(run: Run, workdir: Path) -> list[str]:
    """stderr with the job id as <jobid>. salloc's closing "Job allocation N has been revoked."
    races its exit when salloc itself ended the job (released, or refused under -I): Slurm
    prints it in some runs and not others, before or after the error, so it is dropped there
    (it is kept where scancel revoked the allocation: then it is the news)."""
    out = [normalise(line, run.job_id, workdir) for line in run.err]
    if any("Relinquishing" in line or "error:" in line for line in out):
        out = [line for line in out if not line.endswith("has been revoked.")]
    return out


def show_value(run: Run, key: str) -> str:
    value = run.fields.get(key, "<absent>")
    if key == "NodeList":
        if run.fields.get("NumNodes") == "1":  # which node is each scheduler's choice
            value = "<node>"
    if key == "AccrueTime" and value != "Unknown":
        value = "<time>"
    return value


@pytest.mark.parametrize("scenario", [*SALLOC, *SRUN, "srun waits"])
def test_exit_code(runs: dict, scenario: str) -> None:
    slurm, ranch = pair(runs, scenario)
    assert ranch.rc == slurm.rc, f"{scenario}: Slurm {slurm.rc} {slurm.err}, Ranch {ranch.rc} " \
                                 f"{ranch.err}"


@pytest.mark.parametrize("scenario", [*SALLOC, "srun waits"])
def test_stderr_lines(runs: dict, scenario: str) -> None:
    """salloc's lines, and srun's while it waits (a step's own lines, task N: Killed and the
    like, are the steps' tests')."""
    slurm, ranch = pair(runs, scenario)
    wd = runs["workdirs"]
    assert lines(ranch, wd["ranch"]) == lines(slurm, wd["slurm"])


@pytest.mark.parametrize("scenario", ["salloc env", "salloc exit 3"])
def test_a_released_allocation_says_nothing_after_relinquishing(runs: dict,
                                                                scenario: str) -> None:
    """On a normal exit salloc's last line is "Relinquishing job allocation N": the "has been
    revoked." it prints after that in some runs (the race `lines` drops from both sides) is not
    the rule, and ralloc never says it. Ranch's lines as printed, against Slurm's without it."""
    slurm, ranch = pair(runs, scenario)
    wd = runs["workdirs"]
    printed = [normalise(line, ranch.job_id, wd["ranch"]) for line in ranch.err]
    assert printed == lines(slurm, wd["slurm"])
    assert printed[-1] == "salloc: Relinquishing job allocation <jobid>"


@pytest.mark.parametrize("scenario", ["salloc exit 3", "srun hostname", "revoked",
                                      "salloc waits", "srun waits"])
def test_stdout(runs: dict, scenario: str) -> None:
    """What the command printed (the hostnames sorted: srun's tasks print as they come)."""
    slurm, ranch = pair(runs, scenario)
    wd = runs["workdirs"]

    def text(run: Run, workdir: Path) -> list[str]:
        return sorted(normalise(run.out, run.job_id, workdir).splitlines())

    assert text(ranch, wd["ranch"]) == text(slurm, wd["slurm"])


def slurm_env(run: Run, workdir: Path) -> dict[str, str]:
    """`env`'s SLURM_* lines, normalised; SLURM_CONF is Slurm's plumbing (README)."""
    found = {}
    for line in run.out.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.startswith("SLURM_") and name != "SLURM_CONF":
            found[name] = normalise(value, run.job_id, workdir)
    return found


def test_salloc_environment(runs: dict) -> None:
    """Every SLURM_* name `salloc -N2 env` sees, and its value."""
    slurm, ranch = pair(runs, "salloc env")
    wd = runs["workdirs"]
    want, got = slurm_env(slurm, wd["slurm"]), slurm_env(ranch, wd["ranch"])
    assert sorted(got) == sorted(want)
    assert got == want


@pytest.mark.parametrize(("scenario", "field"), [param(s, k) for s in ENDED for k in KEYS])
def test_job_afterwards(runs: dict, scenario: str, field: str) -> None:
    slurm, ranch = pair(runs, scenario)
    assert show_value(ranch, field) == show_value(slurm, field), (
        f"{scenario}: {field}: Slurm {slurm.fields.get(field)!r}, "
        f"Ranch {ranch.fields.get(field)!r}")


@pytest.mark.parametrize("scenario", ENDED)
def test_show_job_keys(runs: dict, scenario: str) -> None:
    slurm, ranch = pair(runs, scenario)
    assert list(ranch.fields) == list(slurm.fields)


def test_no_shell_holds_the_allocation(runs: dict) -> None:
    """salloc --no-shell exits 0 at once and leaves the job RUNNING until scancel."""
    slurm, ranch = pair(runs, "no-shell")
    assert (ranch.rc, ranch.running) == (slurm.rc, slurm.running) == (0, "RUNNING")
