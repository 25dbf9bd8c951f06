"""SlurmctldParameters=rl_enable with real daemons and a real munged (issue 47): alice's flood
is told to back off with Slurm's text while bob is served, and alice's rqueue backs off and
retries until it is answered, as Slurm's commands do. Needs root (to run as alice and bob)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster, free_port
from tests.integration.test_many_users import Users
from tests.munged import Munged, ensure_users

pytestmark = pytest.mark.skipif(os.getuid() != 0,
                                reason="running commands as alice and bob needs root")

CONF = """\
ClusterName=limits
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=5
MessageTimeout=5
ReturnToService=1
AuthType=auth/munge
AuthInfo=socket={socket}
SlurmctldParameters=rl_enable,rl_bucket_size=4,rl_refill_rate=1,rl_refill_period=2
NodeName=n1 CPUs=1 RealMemory=64
PartitionName=main Nodes=n1 Default=YES
"""


@pytest.fixture(scope="module")
def users() -> Iterator[Users]:
    ids = ensure_users()
    with Munged() as munged:
        base = Path(tempfile.mkdtemp(prefix="ranch-limits-"))
        base.chmod(0o755)
        work = base / "work"
        work.mkdir()
        work.chmod(0o1777)
        try:
            port = free_port()
            with Cluster(base / "cluster", ["n1"],
                         conf_text=CONF.format(port=port, socket=munged.socket)) as c:
                c.port, c.addr = port, ("127.0.0.1", port)
                c.start()
                yield Users(c, munged, ids, work)
        finally:
            subprocess.run(["rm", "-rf", str(base)], check=False)


def _as(users: Users, who: str, code: str) -> subprocess.CompletedProcess:
    uid, gid = users.ids[who]
    env = {**users.user_env, "HOME": str(users.work),
           "RANCH_SERVER": f"127.0.0.1:{users.c.port}", "RANCH_KEY_FILE": users.c.key_file,
           "RANCH_MUNGE_SOCKET": users.munged.socket}
    done = subprocess.run([users.python, "-c", code], cwd=users.work, env=env,
                          capture_output=True, text=True, timeout=60, user=uid, group=gid,
                          extra_groups=[])
    assert done.returncode == 0, done.stderr
    return done


def _flood(users: Users, who: str, n: int) -> list[tuple[str, dict]]:
    """`n` GetJobs back to back from one process as `who`, each on its own connection."""
    code = ("import json\nfrom ranch.protocol.client import request_raw\n"
            f"print(json.dumps([request_raw(('127.0.0.1', {users.c.port}), b'', 'GetJobs', {{}}, "
            f"munge={users.munged.socket!r}) for _ in range({n})]))")
    return [tuple(x) for x in json.loads(_as(users, who, code).stdout)]


def test_a_flood_is_told_to_back_off_and_rqueue_retries(users: Users) -> None:
    got = _flood(users, "alice", 10)
    refused = [doc for kind, doc in got if kind == "Error"]
    assert [kind for kind, _ in got[:4]] == ["JobList"] * 4  # a full bucket: 4 requests
    assert refused and all(d["code"] == "backoff" and d["message"] ==
                           "Rate limit exceeded, please retry momentarily" for d in refused)
    # bob has a bucket of his own, and root is never limited
    assert [kind for kind, _ in _flood(users, "bob", 3)] == ["JobList"] * 3
    assert users.run("root", "ranch.cli.rqueue").returncode == 0
    # alice empties her bucket (asking until she is refused), then runs rqueue in the same
    # process at once: it is told to back off, sleeps 1 s, 2 s... and is answered
    code = ("import runpy, sys, time\nfrom ranch.protocol.client import request_raw\n"
            f"while request_raw(('127.0.0.1', {users.c.port}), b'', 'GetJobs', {{}}, "
            f"munge={users.munged.socket!r})[0] != 'Error': pass\n"
            "t0 = time.monotonic(); sys.argv = ['rqueue']\n"
            "try:\n    runpy.run_module('ranch.cli.rqueue', run_name='__main__')\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print('took', time.monotonic() - t0)\n")
    out = _as(users, "alice", code).stdout
    assert "JOBID" in out
    assert float(out.split()[-1]) >= 0.9  # it waited for a refill (1 s at least)
