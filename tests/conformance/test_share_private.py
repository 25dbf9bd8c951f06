"""sshare 22.05 under PrivateData=usage beside rshare (issue 43): the tree of test_share.py on a
private Slurm with slurmdbd and on rctld (AuthType=auth/munge, so alice and bob are themselves),
then sshare as bob, as alice, as root, and as alice again once her AdminLevel is Operator:
a user who is not an operator sees only their own associations' rows (assoc_mgr_get_shares),
whatever -a, -A or -u ask for. stdout, stderr and exit status compared.

Needs slurmdbd, MariaDB, MUNGE and root (to run the commands as alice and bob); without them it
skips and says why.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conformance.dbd_side import on_slurm_with_slurmdbd
from tests.conformance.slurm_cluster import SlurmCluster
from tests.conformance.test_share import PRIORITY, TREE, _run, _shares_on_slurm

pytestmark = pytest.mark.skipif(os.getuid() != 0,
                                reason="running sshare as alice and bob needs root")
PRIVATE = PRIORITY + "PrivateData=usage\n"
OPERATOR = "-i modify user alice set AdminLevel=Operator"
# (who, sshare's options); None: OPERATOR runs (as root) between the asks
ASKS: tuple[tuple[str, str] | None, ...] = (
    ("bob", "-a -P"), ("bob", "-P"), ("bob", "-a -l -P"), ("bob", "-a -P -A physics"),
    ("bob", "-P -u alice"), ("alice", "-a -P"), ("root", "-a -P"), None, ("alice", "-a -P"),
)


def _asks(run) -> list[tuple[int, str, str]]:
    out = []
    for ask in ASKS:
        if ask is None:
            got = run("root", "sacctmgr", *shlex.split(OPERATOR))
            assert got[0] == 0, got
            continue
        who, options = ask
        out.append(run(who, "sshare", *shlex.split(options)))
    return out


@pytest.fixture(scope="module")
def slurm_side() -> list[tuple[int, str, str]]:
    def on(slurm: SlurmCluster) -> list[tuple[int, str, str]]:
        _shares_on_slurm(slurm)  # the tree, and its first calc period

        def run(who: str, command: str, *args: str) -> tuple[int, str, str]:
            argv = slurm.argv(command, *args)
            if who != "root":
                argv = ["runuser", "-u", who, "--", *argv]
            return _run(argv, slurm.env())

        return _asks(run)

    return on_slurm_with_slurmdbd(PRIVATE, on, timeout=90)


def test_rshare_hides_usage_as_sshare_does(slurm_side) -> None:
    from tests.integration.cluster import Cluster
    from tests.munged import Munged, ensure_users, user_python

    ids = ensure_users()
    code = "import sys; from ranch.cli.slurm_names import main; sys.exit(main())"
    with Munged() as munged:
        base = Path(tempfile.mkdtemp(prefix="ranch-private-"))
        base.chmod(0o755)
        try:
            extra = ("AccountingStorageType=accounting_storage/slurmdbd\nAuthType=auth/munge\n"
                     f"AuthInfo=socket={munged.socket}\n" + PRIVATE)
            with Cluster(base / "c", ("n1",), extra=extra) as c:
                c.start_ctld()
                python, user_env = user_python(*ids["alice"])

                def run(who: str, command: str, *args: str) -> tuple[int, str, str]:
                    env = {**user_env, "RANCH_SERVER": f"127.0.0.1:{c.port}",
                           "RANCH_MUNGE_SOCKET": munged.socket, "HOME": str(base)}
                    kw: dict = {}
                    py = python
                    if who == "root":  # the key's holder: the cluster's admin
                        env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
                        py = sys.executable
                    else:
                        uid, gid = ids[who]
                        kw = {"user": uid, "group": gid, "extra_groups": []}
                    p = subprocess.run([py, "-c", code, command, *args], env=env, cwd=base,
                                       capture_output=True, text=True, timeout=60, **kw)
                    return p.returncode, p.stdout, p.stderr

                for line in TREE:
                    got = run("root", "sacctmgr", *shlex.split(line))
                    assert got[0] == 0, (line, got)
                ranch_side = _asks(run)
        finally:
            subprocess.run(["rm", "-rf", str(base)], check=False)
    asks = [a for a in ASKS if a is not None]
    for ask, want, got in zip(asks, slurm_side, ranch_side, strict=True):
        assert got == want, f"sshare {ask}\n{got}\n---- Slurm's:\n{want}"
