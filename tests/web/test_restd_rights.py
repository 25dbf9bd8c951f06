"""slurmrestd's paths on Ranch alone: who a JWT or a Ranch token proves, the rights that follow
(owners, admins, PrivateData=jobs,nodes), and submit and cancel reaching rbatch's and rcancel's
handlers; plus the JWT checks themselves, without a daemon."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ranch.ctld.web.restd_auth import AuthFailure, JwtKey
from tests.integration.cluster import Cluster
from tests.web.http_cluster import TOKEN, USER_TOKEN, http_cluster, start
from tests.web.restd_compare import jwt

V = "/slurm/v0.0.38"
KEY = os.urandom(32)


def test_a_jwt_is_checked_against_the_key(tmp_path: Path) -> None:
    path = tmp_path / "jwt.key"
    path.write_bytes(KEY)
    path.chmod(0o644)  # readable by others: whoever reads it mints anyone's token
    key = JwtKey(str(path))
    with pytest.raises(AuthFailure, match="chmod"):
        key.verify(jwt(KEY, "alice"))
    path.chmod(0o600)
    assert key.verify(jwt(KEY, "alice"))["sun"] == "alice"
    for token, why in ((jwt(b"y" * 32, "alice"), "signature"), (jwt(KEY, "alice", -5), "expired"),
                       (jwt(KEY, "alice", alg="none"), "HS256"), ("a.b", "not a JWT"),
                       ("!!.??.**", "not a JWT")):
        with pytest.raises(AuthFailure, match=why):
            key.verify(token)
    path.write_bytes(b"z" * 32)  # a key rotated in place is read again
    with pytest.raises(AuthFailure, match="signature"):
        key.verify(jwt(KEY, "alice"))
    with pytest.raises(AuthFailure, match="not configured"):
        JwtKey(None).verify(jwt(KEY, "alice"))


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    work = tmp_path_factory.mktemp("restd")
    (work / "jwt.key").write_bytes(KEY)
    (work / "jwt.key").chmod(0o600)
    cluster = http_cluster(work, extra=(f"PrivateData=jobs,nodes\nAuthAltTypes=auth/jwt\n"
                                        f"AuthAltParameters=jwt_key={work / 'jwt.key'}"))
    try:
        start(cluster)
        yield cluster
    finally:
        cluster.stop()


def _as(user: str, acting: str | None = None) -> dict[str, str]:
    return {"X-SLURM-USER-NAME": acting or user, "X-SLURM-USER-TOKEN": jwt(KEY, user)}


def _call(c: Cluster, method: str, path: str, headers: dict, **kw) -> httpx.Response:
    return httpx.request(method, c.http + V + path, headers=headers,  # type: ignore
                         timeout=10, **kw)


def _submit(c: Cluster, headers: dict, name: str, hold: bool = False) -> httpx.Response:
    return _call(c, "POST", "/job/submit", headers, json={
        "script": "#!/bin/sh\nsleep 300\n",
        "job": {"name": name, "environment": ["PATH=/bin:/usr/bin"],
                "current_working_directory": "/tmp", "standard_output": "/dev/null",
                "time_limit": 5, "hold": hold}})


def _ids(r: httpx.Response) -> list[int]:
    assert r.status_code == 200, r.text
    return [j["job_id"] for j in r.json()["jobs"]]


def test_owners_admins_and_private_data(c: Cluster) -> None:
    # a user who is no admin (held: this test's nodes need not run nobody's script)
    nobody = _submit(c, _as("nobody"), "mine", hold=True)
    assert nobody.status_code == 200, nobody.text
    theirs = nobody.json()["job_id"]
    root = _submit(c, _as("root"), "roots").json()["job_id"]
    job = _call(c, "GET", f"/job/{theirs}", _as("root")).json()["jobs"][0]
    assert (job["user_name"], job["name"], job["time_limit"], job["job_state"]) == (
        "nobody", "mine", 5, "PENDING")
    # PrivateData=jobs: nobody sees its own job only; an admin (alice, by JWT or by her Ranch
    # token) sees both
    assert _ids(_call(c, "GET", "/jobs", _as("nobody"))) == [theirs]
    assert _ids(_call(c, "GET", "/jobs", _as("alice"))) == [theirs, root]
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert _ids(_call(c, "GET", "/jobs", bearer)) == [theirs, root]
    assert _call(c, "GET", f"/job/{root}", _as("nobody")).status_code == 500
    # PrivateData=nodes: refused as slurmctld refuses it, to a token of carol's (no admin) too
    for headers in (_as("nobody"), {"Authorization": f"Bearer {USER_TOKEN}"}):
        r = _call(c, "GET", "/nodes", headers)
        assert r.status_code == 500 and r.json()["errors"][0]["error_number"] == 2002, r.text
    assert len(_call(c, "GET", "/nodes", _as("root")).json()["nodes"]) == 4
    # a user cancels their own job, not another's; an admin cancels anybody's
    r = _call(c, "DELETE", f"/job/{root}", _as("nobody"))
    assert r.status_code == 500 and r.json()["errors"][0]["error"] == "Access/permission denied"
    r = _call(c, "DELETE", f"/job/{theirs}", _as("nobody"))
    assert r.status_code == 200, r.text
    assert _call(c, "DELETE", f"/job/{root}", _as("alice")).status_code == 200
    c.wait_for(lambda: {j["job_state"] for j in _call(c, "GET", "/jobs", _as("root")).json()[
        "jobs"]} == {"CANCELLED"}, 15, what="both jobs CANCELLED")


def test_who_a_token_may_act_as(c: Cluster) -> None:
    # root's token acts for anybody (as slurmctld lets SlurmUser's); alice's only for alice
    assert _call(c, "GET", "/jobs", _as("root", acting="nobody")).status_code == 200
    r = _call(c, "GET", "/jobs", _as("alice", acting="bob"))
    assert r.status_code == 401 and "may not act as bob" in r.json()["errors"][0]["description"]
    # HttpAuth=loopback lets an anonymous reader read, as on /api/v1, but not write
    assert _call(c, "GET", "/partitions", {}).status_code == 200
    r = _submit(c, {}, "anonymous")
    assert r.status_code == 401, r.text
    r = _call(c, "DELETE", "/job/1", {})
    assert r.status_code == 401, r.text


def test_an_arrays_id_gives_its_tasks(c: Cluster) -> None:
    r = _call(c, "POST", "/job/submit", _as("root"), json={
        "script": "#!/bin/sh\ntrue\n", "job": {"environment": {"A": "1"}, "array": "1-3",
                                                "hold": True, "name": "arr"}})
    assert r.status_code == 200, r.text
    first = r.json()["job_id"]
    tasks = _call(c, "GET", f"/job/{first}", _as("root")).json()["jobs"]
    assert [(j["array_job_id"], j["array_task_id"], j["name"]) for j in tasks] == [
        (first, t, "arr") for t in (1, 2, 3)]
    assert _call(c, "DELETE", f"/job/{first}", _as("root")).status_code == 200


def test_a_body_that_cannot_be_a_job(c: Cluster) -> None:
    r = _call(c, "POST", "/job/submit", _as("root"), json={
        "script": "#!/bin/sh\ntrue\n",
        "job": {"environment": {"A": "1"}, "tasks": "many", "hetero": 1}})
    assert r.status_code == 400
    errors = r.json()["errors"]
    assert [e["error_code"] for e in errors] == [9001, 9001, 9001], errors
    assert "tasks" in errors[0]["error"] and "hetero" in errors[1]["error"]
    r = _call(c, "POST", "/job/submit", _as("root"), content=b"{not json")
    assert r.status_code == 400 and r.json()["errors"][0]["error_code"] == 9001
    # the controller's own refusal (rbatch's words) comes back in slurmrestd's shape
    r = _call(c, "POST", "/job/submit", _as("root"), json={
        "script": "#!/bin/sh\ntrue\n",
        "job": {"environment": {"A": "1"}, "partition": "nosuch"}})
    assert r.status_code == 500 and "nosuch" in r.json()["errors"][0]["error"], r.text
