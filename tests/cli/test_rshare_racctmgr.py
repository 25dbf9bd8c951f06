"""rshare and racctmgr (sshare/sacctmgr under Slurm's names) answer as a Slurm without slurmdbd:
sshare's header and no rows, sacctmgr's refusal (checked against the real commands by
tests/conformance/test_value_matrix.py; these pin the words without a Slurm)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def call(name: str, *args: str) -> subprocess.CompletedProcess:
    code = "import sys; from ranch.cli.slurm_names import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, name, *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_sshare_prints_its_header_and_no_rows() -> None:
    done = call("sshare")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  "
        "FairShare ",
        "-------------------- ---------- ---------- ----------- ----------- ------------- "
        "---------- "]
    assert call("sshare", "-n").stdout == ""
    assert call("sshare", "-P", "-o", "acc,user").stdout == "Account|User\n"
    assert call("sshare", "-p", "-m").stdout == (
        "Account|User|Partition|RawShares|NormShares|RawUsage|EffectvUsage|FairShare|\n")


def test_sshare_refuses_what_sshare_refuses() -> None:
    done = call("sshare", "-o", "bogus")
    assert (done.returncode, done.stderr) == (1, 'sshare: error: Invalid field requested: '
                                                 '"bogus"\n')
    done = call("sshare", "--json")
    assert done.returncode == 1
    assert done.stderr.startswith("sshare: unrecognized option '--json'\n")


def test_sacctmgr_says_there_is_no_database() -> None:
    done = call("sacctmgr", "list", "account")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == ("You are not running a supported accounting_storage plugin\n"
                           "Only 'accounting_storage/slurmdbd' is supported.\n")
    assert call("sacctmgr", "-V").stdout == "slurm 22.05.8\n"
