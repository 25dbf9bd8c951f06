"""`rctld --check` against real slurmctld 22.05 (issue 46) on a file with a key nobody knows:
slurmctld stops at it (`slurmctld -D` exits 1), and so does the check, in slurmctld's words.
No daemon is started: slurmctld fails while it parses, before munge or any port."""

from __future__ import annotations

import subprocess
import sys

from tests.conformance.conftest import _unavailable
from tests.conformance.slurm_cluster import _find, slurm_missing
from tests.integration.cluster import REPO, free_port

CONF = """\
ClusterName=check
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
SlurmUser=root
StateSaveLocation={dir}/state
SlurmctldPidFile={dir}/slurmctld.pid
SlurmctldLogFile={dir}/slurmctld.log
{unknown}=12
NodeName=n1 CPUs=1
PartitionName=p Nodes=n1 Default=YES
"""


def test_an_unknown_key_fails_the_check_as_it_stops_slurmctld(tmp_path) -> None:
    reason = slurm_missing()
    if reason:
        _unavailable(reason)
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF.format(port=free_port(), dir=tmp_path, unknown="SlurmdTimout"))
    slurm = subprocess.run([_find("slurmctld"), "-D", "-f", str(conf)], capture_output=True,
                           text=True, timeout=60)
    ranch = subprocess.run([sys.executable, "-m", "ranch.ctld", "--check", "-f", str(conf)],
                           cwd=REPO, capture_output=True, text=True, timeout=60)
    assert slurm.stderr.splitlines() == [
        "slurmctld: error: _parse_next_key: Parsing error at unrecognized key: SlurmdTimout",
        "slurmctld: fatal: Unable to process configuration file"]
    assert ranch.returncode == slurm.returncode == 1
    said = slurm.stderr.splitlines()
    assert said[0].split("_parse_next_key: ")[1] in ranch.stderr  # the key, in its words
    assert said[1].split("fatal: ")[1] in ranch.stderr.splitlines()[-1]
    assert not (tmp_path / "state").exists()  # neither started anything
