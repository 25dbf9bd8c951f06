"""The jobs over HTTP against a real rctld, real rnoded and real job processes: /api/v1/jobs and
/api/v1/jobs/{id} are the records `rqueue --json` and `rcontrol show job --json` print, the page
header's counts and the job families of /metrics follow the queue, reads need the token when
HttpAuth=token."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.cluster import Cluster, wait_for
from tests.web.http_cluster import GPUS, TOKEN, _http_up, http_cluster

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ranch.noded.jobs") is None,
                                reason="rnoded has no job runner")
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = http_cluster(tmp_path_factory.mktemp("webjobs"), extra="HttpAuth=token\nKillWait=1")
    try:
        cluster.start_ctld()
        wait_for(lambda: _http_up(cluster.http), what="rctld's HTTP server")  # type: ignore
        for name in cluster.node_names:
            argv = ["-m", "ranch.noded", "--server", f"127.0.0.1:{cluster.port}",
                    "--name", name,
                    "--spool-dir", str(cluster.dir / "spool" / name)]
            if GPUS.get(name):
                argv += ["--fake-gpus", str(GPUS[name])]
            cluster.nodes[name] = cluster._spawn(name, argv)
        cluster.wait_for(lambda: all(cluster.state(n) == "IDLE" for n in cluster.node_names),
                         30, what="every node IDLE")
        yield cluster
    finally:
        cluster.stop()


def _cli(c: Cluster, command: str, *argv: str) -> str:
    done = c.run_cli(f"ranch.cli.{command}", *argv)
    assert done.returncode == 0, f"{command} {argv}: {done.stderr}"
    return done.stdout


def _get(c: Cluster, path: str, **kw) -> httpx.Response:
    return httpx.get(c.http + path, timeout=10, **kw)  # type: ignore[attr-defined]


def _states(c: Cluster) -> dict[int, str]:
    doc = _get(c, "/api/v1/jobs", headers=AUTH).json()
    return {j["job_id"]: j["job_state"][0] for j in doc["jobs"]}


def test_jobs_are_the_records_rqueue_and_show_job_print(c: Cluster) -> None:
    work = str(c.dir)
    running = int(_cli(c, "rbatch", "--parsable", "-D", work, "-J", "long", "--gpus", "1",
                       "--mem", "32M", "-w", "n1", "--wrap", "sleep 60").split(";")[0])
    held = int(_cli(c, "rbatch", "--parsable", "-D", work, "-H", "--wrap", "true")
               .split(";")[0])
    c.wait_for(lambda: _states(c).get(running) == "RUNNING", 20, what="the job RUNNING")
    try:
        # Reads need the token here (HttpAuth=token), the job routes too.
        assert _get(c, "/api/v1/jobs").status_code == 401
        assert _get(c, f"/api/v1/jobs/{running}").status_code == 401
        assert _get(c, "/ui/jobs.json").status_code == 401

        api = _get(c, "/api/v1/jobs", headers=AUTH).json()
        cli = json.loads(_cli(c, "rqueue", "--json"))
        assert {j["job_id"] for j in api["jobs"]} == {running, held}
        assert sorted(api["jobs"], key=lambda j: j["job_id"]) == \
            sorted(cli["jobs"], key=lambda j: j["job_id"])
        assert api["meta"]["command"] == ["GET", "/api/v1/jobs"]
        assert api["meta"]["slurm"]["cluster"] == "web"

        one = _get(c, f"/api/v1/jobs/{running}", headers=AUTH).json()
        show = json.loads(_cli(c, "rcontrol", "show", "job", str(running), "--json"))
        assert one["jobs"] == show["jobs"]
        (job,) = one["jobs"]
        assert job["nodes"] == "n1" and job["job_state"] == ["RUNNING"]
        assert job["gres_detail"] and job["tres_per_node"] == "gres/gpu:1"

        # The page header's counts and the job families of /metrics.
        counts = _get(c, "/ui/jobs.json", headers=AUTH).json()
        assert counts["RUNNING"] == 1 and counts["PENDING"] == 1 and counts["held"] == 1
        text = _get(c, "/metrics", headers=AUTH).text
        fams = {f.name: f.samples[0].value for f in text_string_to_metric_families(text)
                if f.name.startswith(("slurm_jobs", "slurm_queue"))}
        assert fams["slurm_jobs"] == 2
        assert fams["slurm_jobs_running"] == 1 and fams["slurm_jobs_pending"] == 1
        assert fams["slurm_jobs_hold"] == 1 and fams["slurm_jobs_started"] == 1
        assert fams["slurm_jobs_cpus_alloc"] == 1 and fams["slurm_jobs_nodes_alloc"] == 1
        assert fams["slurm_jobs_gpus_alloc"] == 1
        assert fams["slurm_jobs_memory_alloc"] == 32 * 1024 * 1024
        assert fams["slurm_queue_running"] == 1 and fams["slurm_queue_pending"] == 1
        assert fams["slurm_queue_completed"] == 0 and fams["slurm_jobs_failed"] == 0
    finally:
        _cli(c, "rcancel", str(running), str(held))
    c.wait_for(lambda: _states(c).get(running) == "CANCELLED", 20, what="the job CANCELLED")
    text = _get(c, "/metrics", headers=AUTH).text
    assert "slurm_jobs_running 0\n" in text and "slurm_jobs_cancelled 2\n" in text
    assert "slurm_queue_cancelled 2\n" in text


def test_the_jobs_tab_gets_only_what_changed_since_its_listing(c: Cluster) -> None:
    assert _get(c, "/ui/queue").status_code == 401
    whole = _get(c, "/ui/queue", headers=AUTH).json()
    assert whole["full"] and whole["gone"] == []
    assert {j["job_id"] for j in whole["jobs"]} == set(_states(c))
    mark = whole["mark"]
    same = _get(c, f"/ui/queue?since={mark}", headers=AUTH).json()
    assert (same["full"], same["jobs"], same["gone"], same["mark"]) == (False, [], [], mark)
    held = int(_cli(c, "rbatch", "--parsable", "-D", str(c.dir), "-H", "--wrap", "true")
               .split(";")[0])
    try:
        delta = _get(c, f"/ui/queue?since={mark}", headers=AUTH).json()
        listed = [j for j in _get(c, "/api/v1/jobs", headers=AUTH).json()["jobs"]
                  if j["job_id"] == held]
        assert not delta["full"] and delta["jobs"] == listed and delta["gone"] == []
        _cli(c, "rcancel", str(held))
        c.wait_for(lambda: _states(c).get(held) == "CANCELLED", 20, what="the job CANCELLED")
        after = _get(c, f"/ui/queue?since={delta['mark']}", headers=AUTH).json()
        assert [(j["job_id"], j["job_state"]) for j in after["jobs"]] == [(held, ["CANCELLED"])]
    finally:
        _cli(c, "rcancel", str(held))
    # a mark from another controller (a restart, a takeover) or none it knows: the whole again
    for since in ("0a1b2c3d.5", "junk"):
        other = _get(c, f"/ui/queue?since={since}", headers=AUTH).json()
        assert other["full"] and {j["job_id"] for j in other["jobs"]} == set(_states(c))


def test_bad_and_unknown_job_ids(c: Cluster) -> None:
    r = _get(c, "/api/v1/jobs/12x", headers=AUTH)
    assert r.status_code == 400
    assert r.json()["errors"][0]["field"] == "job_id"
    assert "Invalid job id specified: 12x" in r.json()["errors"][0]["error"]
    r = _get(c, "/api/v1/jobs/987654", headers=AUTH)
    assert r.status_code == 404 and "987654" in r.json()["errors"][0]["error"]
    assert _get(c, "/api/v1/jobs/987654_1", headers=AUTH).status_code == 404
