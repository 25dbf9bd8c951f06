"""rqueue asks rctld for only the record keys its default and -l views and its filters read
(GetJobs.fields): those views print the same from the cut records as from whole ones, and
rctld cuts them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from launcher import REPO, Controller
from test_fast_path import Strict

from ranch.cli import rqueue
from ranch.protocol import messages as m

CONF = """\
ClusterName=reads
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
AuthKeyFile={key}
NodeName=n[1-2] CPUs=2 RealMemory=100
PartitionName=main Nodes=n[1-2] Default=YES
PartitionName=other Nodes=n2
"""
VIEWS = [[], ["-l"], ["-r"], ["-t", "all"], ["-u", "root,alice"], ["-p", "other"],
         ["-j", "1"], ["-n", "train"], ["-A", "acct"], ["-h", "-l"], ["--me"]]


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory):
    ctl = Controller(tmp_path_factory.mktemp("reads"), CONF)
    ctl.start()
    try:
        for argv in (["-J", "train", "-A", "acct"], ["-a", "1-4"], ["-p", "other", "-t", "5"],
                     ["-b", "now+3600"]):
            subprocess.run([sys.executable, "-m", "ranch.cli.rbatch", "--hold", *argv, "--wrap",
                            "true"], cwd=REPO, env=ctl.env, check=True, capture_output=True)
        whole = ctl.ask(m.GetJobs()).jobs
        cut = ctl.ask(m.GetJobs(fields=rqueue.READS)).jobs
        yield whole, cut
    finally:
        ctl.stop()


def test_rctld_sends_only_the_keys_asked_for(full) -> None:
    whole, cut = full
    assert len(cut) == len(whole) >= 7
    assert all(set(c) <= set(rqueue.READS) for c in cut)
    assert [{k: w[k] for k in rqueue.READS if k in w} for w in whole] == list(cut)


@pytest.mark.parametrize("argv", VIEWS, ids=" ".join)
def test_default_views_read_only_the_keys_they_ask_for(full, argv: list[str]) -> None:
    whole, _ = full
    args = rqueue.read_args(argv)
    keep = rqueue.reads(args)  # READS, and what -l and the filters add
    assert set(rqueue.READS) <= set(keep) and len(keep) <= len(rqueue.READS) + 1
    strict = [Strict(dict(j), keep) for j in whole]
    now = 1_800_000_000.0
    assert rqueue.render(args, rqueue.select(args, strict), now) == rqueue.render(
        args, rqueue.select(args, [dict(j) for j in whole]), now)


def test_other_views_ask_for_every_key() -> None:
    for argv in (["--json"], ["-o", "%i %Z"], ["-O", "jobid,workdir"], ["-s"]):
        assert rqueue.reads(rqueue.read_args(argv)) == ()
