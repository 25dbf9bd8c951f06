"""A real client written for slurmrestd 22.05, run unchanged against rctld: SchedMD's generated
v0.0.38 Python client (PyPI `openapi-slurm-0.0.38-client`, package `openapi_client`; its
pydantic models parse every answer), with the JWT headers slurmrestd's rest_auth/jwt takes."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.integration.cluster import Cluster
from tests.web.http_cluster import cli, http_cluster, start
from tests.web.restd_compare import jwt

openapi_client = pytest.importorskip(
    "openapi_client", reason="pip install openapi-slurm-0.0.38-client (the test extras have it)")
from openapi_client.api.slurm_api import SlurmApi  # noqa: E402
from openapi_client.exceptions import ApiException  # noqa: E402
from openapi_client.models import V0038JobProperties, V0038JobSubmission  # noqa: E402

KEY = os.urandom(32)


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    work = tmp_path_factory.mktemp("restd-client")
    (work / "jwt.key").write_bytes(KEY)
    (work / "jwt.key").chmod(0o600)
    cluster = http_cluster(work, extra=(f"AuthAltTypes=auth/jwt\n"
                                        f"AuthAltParameters=jwt_key={work / 'jwt.key'}"))
    try:
        start(cluster)
        yield cluster
    finally:
        cluster.stop()


def _api(c: Cluster, user: str = "root") -> SlurmApi:
    conf = openapi_client.Configuration(host=c.http)  # type: ignore[attr-defined]
    conf.api_key = {"user": user, "token": jwt(KEY, user)}
    return SlurmApi(openapi_client.ApiClient(conf))


def test_the_generated_client_runs_unchanged(c: Cluster) -> None:
    api = _api(c)
    assert [p.ping for p in api.slurm_v0038_ping().pings] == ["UP"]
    assert sorted(n.name for n in api.slurm_v0038_get_nodes().nodes) == ["n1", "n2", "n3", "n4"]
    node = api.slurm_v0038_get_node("n1").nodes[0]
    assert (node.name, node.cpus, node.real_memory, node.state) == ("n1", 1, 64, "idle")
    parts = {p.name: p for p in api.slurm_v0038_get_partitions().partitions}
    assert parts["main"].nodes == "n[1-4]" and parts["main"].flags == ["default"]
    assert api.slurm_v0038_get_partition("gpu").partitions[0].total_nodes == 3

    cli(c, "ranch.cli.rcontrol", "create", "reservation", "ReservationName=later",
        "StartTime=now+3600", "Duration=10", "Nodes=n4", "Users=root")
    resv = api.slurm_v0038_get_reservations().reservations
    assert [(r.name, r.node_list, r.node_count) for r in resv] == [("later", "n4", 1)]
    assert api.slurm_v0038_get_reservation("later").reservations[0].name == "later"

    job = V0038JobProperties(name="via-client", environment={"PATH": "/bin:/usr/bin"},
                             current_working_directory=str(c.dir), standard_output="/dev/null",
                             partition="gpu", time_limit=10)
    submitted = api.slurm_v0038_submit_job(
        V0038JobSubmission(script="#!/bin/sh\nsleep 300\n", job=job))
    jid = submitted.job_id
    assert jid and submitted.step_id == "BATCH"
    c.wait_for(lambda: api.slurm_v0038_get_job(str(jid)).jobs[0].job_state == "RUNNING", 15,
               what="the client's job RUNNING")
    got = api.slurm_v0038_get_job(str(jid)).jobs[0]
    assert (got.name, got.partition, got.time_limit, got.user_name) == (
        "via-client", "gpu", 10, "root")
    assert got.job_resources.allocated_hosts == 1
    assert jid in [j.job_id for j in api.slurm_v0038_get_jobs().jobs]
    # rqueue sees what the client submitted, as rbatch's
    assert f"{jid}" in cli(c, "ranch.cli.rqueue", "-h", "-o", "%i %j")
    stats = api.slurm_v0038_diag().statistics
    assert stats.jobs_running == 1 and stats.jobs_submitted == 1

    with pytest.raises(ApiException) as refused:  # a user who is no admin: not another's job
        _api(c, "nobody").slurm_v0038_cancel_job(str(jid))
    assert refused.value.status == 500 and "Access/permission denied" in refused.value.body
    api.slurm_v0038_cancel_job(str(jid))
    c.wait_for(lambda: api.slurm_v0038_get_job(str(jid)).jobs[0].job_state == "CANCELLED", 15,
               what="the client's job CANCELLED")
    with pytest.raises(ApiException) as missing:
        api.slurm_v0038_get_job("999")
    assert missing.value.status == 500 and "Invalid job id specified" in missing.value.body
