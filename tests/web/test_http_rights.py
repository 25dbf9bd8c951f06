"""An HTTP token names a user, who gets that user's rights (issue 19): writes need an admin,
and PrivateData hides nodes and other users' jobs from readers who are not admins."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from ranch.protocol import messages as m
from tests.integration.cluster import Cluster
from tests.web.http_cluster import TOKEN, USER_TOKEN, http_cluster, start

ADMIN = {"Authorization": f"Bearer {TOKEN}"}  # alice, in AdminUsers
USER = {"Authorization": f"Bearer {USER_TOKEN}"}  # carol, who is not


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = http_cluster(tmp_path_factory.mktemp("rights"), extra="PrivateData=jobs,nodes")
    try:
        start(cluster)
        yield cluster
    finally:
        cluster.stop()


def _get(c: Cluster, path: str, headers: dict | None = None) -> httpx.Response:
    return httpx.get(c.http + path, headers=headers or {}, timeout=10)  # type: ignore


def test_a_token_that_is_no_admins_may_not_change_nodes(c: Cluster) -> None:
    r = httpx.post(f"{c.http}/api/v1/nodes/n2/state", json={"state": "DRAIN", "reason": "x"},
                   headers=USER, timeout=10)  # type: ignore[attr-defined]
    assert r.status_code == 403, r.text
    error = r.json()["errors"][0]["error"]
    assert error.startswith("Access/permission denied: update NodeName=n2") and "carol" in error
    assert c.state("n2") == "IDLE"
    ok = httpx.post(f"{c.http}/api/v1/nodes/n2/state", json={"state": "DRAIN", "reason": "x"},
                    headers=ADMIN, timeout=10)  # type: ignore[attr-defined]
    assert ok.status_code == 200, ok.text
    httpx.post(f"{c.http}/api/v1/nodes/n2/state", json={"state": "RESUME"}, headers=ADMIN,
               timeout=10)  # type: ignore[attr-defined]


def test_private_data_hides_nodes_and_others_jobs(c: Cluster) -> None:
    for path in ("/api/v1/nodes", "/api/v1/nodes/n1", "/api/v1/sinfo", "/metrics",
                 "/ui/grid.json"):
        for headers in (None, USER):  # no token (a loopback reader), or carol's
            r = _get(c, path, headers)
            assert r.status_code == 403, (path, r.status_code)
            assert "PrivateData=nodes" in r.json()["errors"][0]["error"]
        assert _get(c, path, ADMIN).status_code == 200, path

    reply = c.request(m.SubmitJob("#!/bin/sh\nsleep 300\n", "root", 0, 0, str(c.dir)))
    assert isinstance(reply, m.SubmitReply), reply
    jid = reply.job_id
    try:
        admin_view = [j["job_id"] for j in _get(c, "/api/v1/jobs", ADMIN).json()["jobs"]]
        assert jid in admin_view
        assert _get(c, "/api/v1/jobs", USER).json()["jobs"] == []
        tab = _get(c, "/ui/queue", USER).json()  # the page's Jobs tab, whole then since
        assert tab["full"] and tab["jobs"] == []
        assert jid in [j["job_id"] for j in _get(c, "/ui/queue", ADMIN).json()["jobs"]]
        assert _get(c, "/api/v1/jobs").json()["jobs"] == []
        assert _get(c, f"/api/v1/jobs/{jid}", USER).status_code == 404
        c.request(m.CancelJobs((jid,), user="root", uid=0))
        c.wait_for(lambda: _get(c, f"/api/v1/jobs/{jid}", ADMIN).json()["jobs"][0]["job_state"]
                   == ["CANCELLED"], 20, what="the job CANCELLED")
        since = _get(c, f"/ui/queue?since={tab['mark']}", USER).json()
        assert not since["full"] and since["jobs"] == [] and since["gone"] == []
    finally:
        c.request(m.CancelJobs((jid,), user="root", uid=0))
