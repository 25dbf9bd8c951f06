"""slurmrestd's own paths (/slurm/v0.0.38) against Debian's slurmrestd 22.05, the oracle: the same
scenario on a private real Slurm with slurmrestd (rest_auth/jwt) and on a Ranch of the same shape
(a reservation, a job from sbatch/rbatch, one from POST job/submit, the nodes, the partition),
the same requests to both, the answers compared by field names and types recursively and by the
values the scenario fixes; then every Ranch answer checked against the OpenAPI schema slurmrestd
itself serves (GET /openapi/v3): Ranch may break it only where slurmrestd's own answer does."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conformance.conftest import start_slurm
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import _find
from tests.integration.cluster import free_port
from tests.web.restd_compare import jwt, schema_errors, shape_diff

V = "/slurm/v0.0.38"
# fields whose null (slurmctld's NO_VAL) may stand against a value: none in this scenario
NULLABLE: frozenset[str] = frozenset()
# what the scenario fixes, compared as values (by the listing's key)
FIXED = {
    "jobs": ("job_id", "name", "job_state", "partition", "user_name", "batch_flag", "cluster",
             "array_job_id", "standard_output", "standard_error", "node_count", "tasks",
             "requeue", "flags", "tres_req_str", "tres_alloc_str", "time_limit", "nodes"),
    "nodes": ("name", "state", "state_flags", "partitions", "cpus", "real_memory", "boards",
              "sockets", "cores", "threads", "weight", "tres"),
    "partitions": ("name", "nodes", "total_nodes", "total_cpus", "state", "flags",
                   "max_time_limit", "default_time_limit", "tres"),
    "reservations": ("name", "node_list", "node_count", "core_count", "users", "flags",
                     "tres", "partition"),
    "pings": ("hostname", "ping", "status", "mode"),
    "errors": ("error_number", "errno", "error_code", "error"),
}


def _reservation(cluster) -> None:
    r = cluster.run("scontrol", "create", "reservation", "ReservationName=r1",
                    "StartTime=now+3600", "Duration=10", "Nodes=c1", "Users=root")
    assert r.returncode == 0, r.stderr


def _wait(pred, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def scenario(cluster, base: str, key: bytes) -> dict[str, tuple[int, Any]]:
    """The requests, in order, each one's (status, JSON) under a name."""
    root = {"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": jwt(key, "root")}
    alice = {"X-SLURM-USER-NAME": "alice", "X-SLURM-USER-TOKEN": jwt(key, "alice")}
    seen: dict[str, tuple[int, Any]] = {}
    client = httpx.Client(base_url=base, timeout=20)

    def ask(name: str, method: str, path: str, headers=root, **kw: Any) -> Any:
        r = client.request(method, V + path, headers=headers, **kw)
        try:
            body = r.json()
        except ValueError:
            body = r.text
        seen[name] = (r.status_code, body)
        return body

    _reservation(cluster)
    r = cluster.run("sbatch", "-J", "one", "-o", "/dev/null", "--wrap", "sleep 300")
    assert r.returncode == 0, r.stderr
    ask("submit", "POST", "/job/submit", json={
        "script": "#!/bin/sh\nsleep 300\n",
        "job": {"name": "two", "environment": {"PATH": "/bin:/usr/bin"},
                "current_working_directory": str(cluster.workdir),
                "standard_output": "/dev/null"}})
    ask("submit without environment", "POST", "/job/submit",
        json={"script": "#!/bin/sh\ntrue\n", "job": {"name": "bad"}})

    def both_running() -> bool:
        jobs = client.get(V + "/jobs", headers=root).json()["jobs"]
        return [j["job_state"] for j in jobs] == ["RUNNING", "RUNNING"]

    _wait(both_running, f"both jobs RUNNING on {cluster.name}")
    for name, path in (("ping", "/ping"), ("diag", "/diag"), ("jobs", "/jobs"),
                       ("job 1", "/job/1"), ("job 99", "/job/99"), ("nodes", "/nodes"),
                       ("node c1", "/node/c1"), ("node zz", "/node/zz"),
                       ("partitions", "/partitions"), ("partition main", "/partition/main"),
                       ("partition zz", "/partition/zz"), ("reservations", "/reservations"),
                       ("reservation r1", "/reservation/r1"),
                       ("reservation zz", "/reservation/zz")):
        ask(name, "GET", path)
    ask("jobs as alice", "GET", "/jobs", headers=alice)
    ask("cancel as alice", "DELETE", "/job/1", headers=alice)
    ask("cancel 2", "DELETE", "/job/2")
    ask("cancel 99", "DELETE", "/job/99")
    _wait(lambda: client.get(V + "/job/2", headers=root).json()["jobs"][0]["job_state"]
          == "CANCELLED", f"job 2 CANCELLED on {cluster.name}")
    ask("job 2 cancelled", "GET", "/job/2")
    # refused credentials: slurmrestd says 401 without one, and slurmctld refuses a forged
    # one (slurmrestd: 500); Ranch checks the token itself and says 401 (docs/slurm-compat.md)
    for name, headers in (("no credentials", {}),
                          ("token without name", {"X-SLURM-USER-TOKEN": jwt(key, "root")}),
                          ("forged token", {"X-SLURM-USER-NAME": "root",
                                            "X-SLURM-USER-TOKEN": jwt(b"x" * 32, "root")}),
                          ("expired token", {"X-SLURM-USER-NAME": "root",
                                             "X-SLURM-USER-TOKEN": jwt(key, "root", -60)})):
        r = client.get(V + "/jobs", headers=headers)
        seen[name] = (r.status_code, None)
    r = client.get("/openapi/v3", headers=root)
    seen["openapi"] = (r.status_code, r.json() if r.status_code == 200 else None)
    return seen


def _slurmrestd(slurm, port: int, log: Path) -> subprocess.Popen:
    """slurmrestd on 127.0.0.1:PORT with rest_auth/jwt (SLURM_JWT=daemon makes auth/jwt its own
    plugin) and only the v0.0.38 API (dbv0.0.38 wants a slurmdbd), as nobody: it refuses root."""
    env = slurm.env() | {"SLURM_JWT": "daemon"}
    with open(log, "ab") as out:
        proc = subprocess.Popen([_find("slurmrestd"), "-a", "rest_auth/jwt", "-s", "v0.0.38",
                                 "-u", "nobody", "-g", "nogroup", f"127.0.0.1:{port}"],
                                env=env, stdout=out, stderr=subprocess.STDOUT)

    def up() -> bool:
        assert proc.poll() is None, f"slurmrestd exited:\n{log.read_text()[-2000:]}"
        try:
            return httpx.get(f"http://127.0.0.1:{port}/openapi/v3", timeout=2).status_code \
                in (200, 401)
        except httpx.HTTPError:
            return False

    _wait(up, "slurmrestd to listen", 20)
    return proc


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> dict[str, dict[str, tuple[int, Any]]]:
    if _find("slurmrestd") is None:
        if os.environ.get("RANCH_REQUIRE_SLURMRESTD") == "1":
            pytest.fail("RANCH_REQUIRE_SLURMRESTD=1 but slurmrestd is not installed "
                        "(apt-get install slurmrestd)")
        pytest.skip("slurmrestd not installed (apt-get install slurmrestd)")
    keydir = Path(tempfile.mkdtemp(prefix="ranch-restd-"))
    keydir.chmod(0o755)  # slurmrestd runs as nobody; only slurmctld reads the key
    key = os.urandom(32)
    keyfile = keydir / "jwt.key"
    keyfile.write_bytes(key)
    keyfile.chmod(0o600)
    jwt_conf = f"AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={keyfile}\n"
    out: dict[str, dict[str, tuple[int, Any]]] = {}
    slurm = start_slurm(extra_conf=jwt_conf)
    restd = None
    try:
        port = free_port()
        restd = _slurmrestd(slurm, port, tmp_path_factory.mktemp("restd") / "slurmrestd.log")
        out["slurm"] = scenario(slurm, f"http://127.0.0.1:{port}", key)
    finally:
        if restd is not None:
            restd.terminate()
            restd.wait(10)
        slurm.stop()
    http = free_port()
    with RanchCluster(SHAPE, extra_conf=jwt_conf + f"HttpListen=127.0.0.1:{http}\n"
                      "HttpAuth=token\n") as ranch:
        out["ranch"] = scenario(ranch, f"http://127.0.0.1:{http}", key)
    return out


def _comparable(name: str) -> list[str]:
    return [n for n in ("submit", "submit without environment", "ping", "diag", "jobs", "job 1",
                        "job 99", "nodes", "node c1", "node zz", "partitions",
                        "partition main", "partition zz", "reservations", "reservation r1",
                        "reservation zz",
                        "jobs as alice", "cancel as alice", "cancel 2", "cancel 99",
                        "job 2 cancelled") if name in ("", n)]


@pytest.mark.parametrize("name", _comparable(""))
def test_same_answer(answers, name: str) -> None:
    (s_code, slurm), (r_code, ranch) = answers["slurm"][name], answers["ranch"][name]
    assert r_code == s_code, f"{name}: status {r_code}, slurmrestd {s_code}\n{ranch}"
    diffs = shape_diff(slurm, ranch, NULLABLE)
    assert not diffs, f"{name}:\n" + "\n".join(diffs)
    for key, fields in FIXED.items():
        got = [{f: item.get(f) for f in fields} for item in ranch.get(key) or ()]
        want = [{f: item.get(f) for f in fields} for item in slurm.get(key) or ()]
        if key == "errors":  # the words after the number are Ranch's own in descriptions
            assert got == want, f"{name}: errors {ranch['errors']}, slurmrestd {slurm['errors']}"
        else:
            assert got == want, f"{name}: {key} differ"


def test_refused_credentials(answers) -> None:
    for name in ("no credentials", "token without name", "forged token", "expired token"):
        s_code, r_code = answers["slurm"][name][0], answers["ranch"][name][0]
        assert s_code != 200 and r_code == 401, (name, s_code, r_code)


def test_answers_fit_slurmrestds_own_schema(answers) -> None:
    """Against the OpenAPI spec slurmrestd 22.05 serves: Ranch breaks it only where slurmrestd's
    own answer to the same request breaks it (22.05 prints version numbers as integers where
    its spec says strings, for one)."""
    code, spec = answers["slurm"]["openapi"]
    assert code == 200, "slurmrestd served no /openapi/v3"
    routes = {"submit": ("/job/submit", "post"), "ping": ("/ping", "get"),
              "diag": ("/diag", "get"), "jobs": ("/jobs", "get"),
              "job 1": ("/job/{job_id}", "get"), "nodes": ("/nodes", "get"),
              "node c1": ("/node/{node_name}", "get"), "partitions": ("/partitions", "get"),
              "partition main": ("/partition/{partition_name}", "get"),
              "reservations": ("/reservations", "get"),
              "reservation r1": ("/reservation/{reservation_name}", "get")}
    checked = 0
    for name, (path, method) in routes.items():
        own = schema_errors(spec, V + path, method, answers["slurm"][name][1])
        ours = schema_errors(spec, V + path, method, answers["ranch"][name][1])
        assert ours <= own, f"{name}: Ranch alone breaks the schema at {sorted(ours - own)}"
        checked += 1
    assert checked == len(routes)
