"""What rbatch reads from a script as sbatch 22.05 does (cli/sbatch_script.py): directives only
at a line's start, #PBS lines in sbatch's words, --array's syntax and its variables. The same
forms are compared with a real Slurm in tests/conformance/test_combinations.py."""

from __future__ import annotations

import pytest

from ranch.cli.controller import CliError
from ranch.cli.sbatch_script import (
    INVALID_ARRAY,
    array_env,
    array_spec,
    check_line_breaks,
    directive_lines,
    pbs_words,
)


def test_a_directive_starts_its_line() -> None:
    script = ("#!/bin/sh\n #SBATCH -J lead\n#SBATCH-J x\n\n# note\n#SBATCH -n 2\necho\n"
              "#SBATCH -N 9\n")
    assert directive_lines(script, "#SBATCH") == [(3, "-J x"), (6, " -n 2")]


def test_dos_line_breaks_are_refused_with_sbatchs_two_lines() -> None:
    with pytest.raises(CliError) as exc:
        check_line_breaks("#!/bin/sh\r\ntrue\r\n", "sbatch")
    assert exc.value.message.splitlines() == [
        "Batch script contains DOS line breaks (\\r\\n)",
        "sbatch: error: instead of expected UNIX line breaks (\\n)."]
    check_line_breaks("#!/bin/sh\ntrue\n", "sbatch")


def test_pbs_lines_in_sbatch_words() -> None:
    script = ("#!/bin/sh\n#PBS -N name -q main\n#PBS -l walltime=10:00,nodes=2:ppn=1,mem=100mb\n"
              "#PBS -m be -M x@y\n#PBS -h\n#PBS -t 1-3 # a comment\n#PBS -W depend=afterok:1\n"
              "#PBS -r n -V\n#PBS -v FOO=1,BAR\necho\n")
    assert pbs_words(script) == [
        "--job-name=name", "--partition=main", "--time=10:00", "--nodes=2",
        "--ntasks-per-node=1", "--mem=100M", "--mail-type=BEGIN,END", "--mail-user=x@y",
        "--hold", "--array=1-3", "--dependency=afterok:1", "--export=FOO=1,BAR"]


@pytest.mark.parametrize(("given", "sent"), [
    ("[1-3]", "1-3"), ("1,,4", "1,4"), ("[1-3", "1-3"), ("1-3]", "1-3"), ("1-9:2%2", "1-9:2%2"),
    ("0,4,7-9", "0,4,7-9"), ("1-3%", "1-3%")])
def test_array_forms_slurmctld_takes(given: str, sent: str) -> None:
    assert array_spec(given) == sent


@pytest.mark.parametrize("given", ["x", "1:2", "3-1", "1-", "-1", "1-3:0", ",", "1-x"])
def test_array_forms_slurmctld_refuses(given: str) -> None:
    with pytest.raises(CliError, match=INVALID_ARRAY):
        array_spec(given)


def test_array_variables() -> None:
    assert array_env("1-5:2") == {"SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1",
                                  "SLURM_ARRAY_TASK_MAX": "5", "SLURM_ARRAY_TASK_STEP": "2"}
    # measured on Slurm 22.05: a list without a step has step 1, whatever its gaps
    assert array_env("2,6,10%1")["SLURM_ARRAY_TASK_STEP"] == "1"
    assert array_env("0,4,7-9")["SLURM_ARRAY_TASK_COUNT"] == "5"
