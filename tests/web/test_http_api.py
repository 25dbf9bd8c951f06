"""rctld over HTTP against real daemons: every route, the same records as the CLI, writes through
the rcontrol path, and every refusal."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.cluster import Cluster, wait_for
from tests.web.http_cluster import OTHER_TOKEN, TOKEN, cli, http_cluster, start

AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Figures every heartbeat changes: the API and the CLI may read two snapshots apart.
VOLATILE = {"cpu_load", "free_mem", "last_update", "meta"}


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = http_cluster(tmp_path_factory.mktemp("web"))
    try:
        start(cluster)
        yield cluster
    finally:
        cluster.stop()


def get(c: Cluster, path: str, **kw) -> httpx.Response:
    return httpx.get(c.http + path, timeout=10, **kw)  # type: ignore[attr-defined]


def post_state(c: Cluster, nodes: str, body, headers=None) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{c.http}/api/v1/nodes/{nodes}/state", content=content,  # type: ignore
                      headers=headers if headers is not None else AUTH, timeout=10)


def stable(doc):
    if isinstance(doc, dict):
        return {k: stable(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [stable(x) for x in doc]
    return doc


def test_page_forbids_framing_and_foreign_code(c: Cluster) -> None:
    """The page has drain buttons: no other site may frame it, and it runs only its own code
    (tests/web/test_browser.py checks that the page still works under this policy)."""
    headers = get(c, "/").headers
    assert headers["X-Frame-Options"] == "DENY"
    csp = headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_nodes_and_partitions_are_the_records_rcontrol_prints(c: Cluster) -> None:
    api = get(c, "/api/v1/nodes")
    assert api.status_code == 200
    assert api.headers["content-type"] == "application/json"
    shown = json.loads(cli(c, "ranch.cli.rcontrol", "--json", "show", "node"))
    assert [n["name"] for n in api.json()["nodes"]] == ["n1", "n2", "n3", "n4"]
    assert stable(api.json()["nodes"]) == stable(shown["nodes"])

    one = get(c, "/api/v1/nodes/n2").json()["nodes"]
    assert stable(one) == stable(json.loads(cli(c, "ranch.cli.rcontrol", "--json", "show", "node",
                                                "n2"
                                                ))["nodes"])
    assert [n["name"] for n in get(c, "/api/v1/nodes/n[1-2]").json()["nodes"]] == ["n1", "n2"]

    parts = get(c, "/api/v1/partitions").json()["partitions"]
    assert parts == json.loads(cli(c, "ranch.cli.rcontrol", "--json", "show", "partition"))[
        "partitions"]
    assert [p["name"] for p in parts] == ["main", "gpu"]


def test_sinfo_route_is_rinfo_json(c: Cluster) -> None:
    api = get(c, "/api/v1/sinfo").json()
    mine = json.loads(cli(c, "ranch.cli.rinfo", "--json"))

    def entries(doc):  # load and free memory move with heartbeats
        out = stable(doc["sinfo"])
        for e in out:
            e["cpus"].pop("load")
            e["memory"].pop("free")
        return out

    assert entries(api) == entries(mine)


def test_unknown_or_bad_node_names(c: Cluster) -> None:
    r = get(c, "/api/v1/nodes/zz9")
    assert r.status_code == 404
    assert r.json()["errors"] == [{"error": "Node zz9 not found", "field": "name"}]
    r = get(c, "/api/v1/nodes/n[3-1]")
    assert r.status_code == 400
    assert "bad node name or hostlist" in r.json()["errors"][0]["error"]


def test_drain_and_resume_through_the_api_show_in_rinfo(c: Cluster) -> None:
    r = post_state(c, "n3", {"state": "DRAIN", "reason": "fan noise"})
    assert r.status_code == 200, r.text
    assert r.json() == {"changed": ["n3"], "errors": [], "user": "alice"}
    listing = cli(c, "ranch.cli.rinfo", "-R", "-h", "-o", "%N|%E|%u")
    assert "n3|fan noise|alice" in listing.splitlines()
    show = cli(c, "ranch.cli.rcontrol", "show", "node", "n3")
    assert "State=IDLE+DRAIN" in show and "Reason=fan noise [alice@" in show

    api = get(c, "/api/v1/nodes/n3").json()["nodes"][0]
    assert api["state"] == ["IDLE", "DRAIN"]
    assert (api["reason"], api["reason_set_by_user"]) == ("fan noise", "alice")

    r = post_state(c, "n3", {"state": "resume"},
                   {"Authorization": f"Bearer {OTHER_TOKEN}"})
    assert r.status_code == 200 and r.json()["user"] == "bob"
    c.wait_for(lambda: c.state("n3") == "IDLE", what="n3 resumed")


@pytest.mark.parametrize(("body", "status", "error", "field"), [
    ({"state": "DRAIN"}, 400,
     "You must specify a reason when DOWNING or DRAINING a node. Request denied", "reason"),
    ({"state": "fail", "reason": " "}, 400,
     "You must specify a reason when DOWNING or DRAINING a node. Request denied", "reason"),
    ({"state": "SLEEPY", "reason": "x"}, 400, "invalid node state 'SLEEPY'. Valid states are",
     "state"),
    ({"reason": "x"}, 400, "state is required", "state"),
    ({"state": "DRAIN", "reason": 5}, 400, "reason must be a string", "reason"),
    ({"state": "DRAIN", "reason": "x", "user": "root"}, 400, "unknown field 'user'", "user"),
    (["DRAIN"], 400, "must be a JSON object", None),
    (b"{not json", 400, "request body is not JSON", None),
])
def test_bad_writes_are_refused_with_the_problem(c: Cluster, body, status, error, field) -> None:
    r = post_state(c, "n1", body)
    assert r.status_code == status, r.text
    err = r.json()["errors"][0]
    assert error in err["error"]
    assert err.get("field") == field
    assert c.state("n1") == "IDLE"


def test_writes_need_a_known_token_even_on_loopback(c: Cluster) -> None:
    body = {"state": "DRAIN", "reason": "x"}
    r = post_state(c, "n1", body, headers={})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert "Authorization: Bearer TOKEN" in r.json()["errors"][0]["error"]
    r = post_state(c, "n1", body, headers={"Authorization": "Bearer not-a-known-token-at-all"})
    assert r.status_code == 401 and r.json()["errors"][0]["error"] == "unknown token"
    r = post_state(c, "n1", body, headers={"Authorization": f"Basic {TOKEN}"})
    assert r.status_code == 401
    assert c.state("n1") == "IDLE"


def test_write_to_unknown_nodes_changes_nothing(c: Cluster) -> None:
    r = post_state(c, "n[1-2],zz", {"state": "DRAIN", "reason": "x"})
    assert r.status_code == 404
    assert r.json()["errors"] == [{"error": "unknown node(s): zz"}]
    assert c.state("n1") == "IDLE"
    assert httpx.get(f"{c.http}/api/v1/nodes/n1/state", timeout=5).status_code == 405  # type: ignore


def test_metrics_in_slurm_exporter_and_dcgm_names(c: Cluster) -> None:
    assert post_state(c, "n2", {"state": "DRAIN", "reason": 'disk "sda" failing'}).status_code \
        == 200
    try:
        r = get(c, "/metrics")
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
        fams = {f.name: f for f in text_string_to_metric_families(r.text)}

        def sample(name: str, **labels: str) -> float:
            got = [s.value for s in fams[name].samples
                   if all(s.labels.get(k) == v for k, v in labels.items())]
            assert len(got) == 1, (name, labels, fams[name].samples)
            return got[0]

        assert sample("slurm_nodes") == 4
        assert sample("slurm_nodes_idle") == 4  # Slurm counts the drained IDLE node too
        assert sample("slurm_nodes_drain") == 1 and sample("slurm_nodes_drained") == 1
        assert sample("slurm_node_cpus", node="n1") == 1
        assert sample("slurm_node_memory_bytes", node="n4") == 64 * 1024 * 1024
        assert sample("slurm_node_gpus", node="n1") == 2
        assert sample("slurm_node_memory_free_bytes", node="n1") > 0
        assert sample("slurm_node_cpu_total", node="n2", status="drained") == 1
        assert sample("slurm_node_cpu_other", node="n2", status="drained") == 1
        assert sample("slurm_node_cpu_idle", node="n1", status="idle") == 1
        assert sample("slurm_cpus_total") == 4
        assert sample("ranch_node_state", node="n2", state="drained",
                      reason_source="admin") == 1
        assert sample("ranch_node_state", node="n1", state="idle", reason_source="") == 1
        assert sample("ranch_node_reason_timestamp_seconds", node="n2",
                      reason='disk "sda" failing', user="alice") > 1e9
        for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED"):
            gpus = [s for s in fams[name].samples if s.labels["Hostname"] == "n1"]
            assert sorted(s.labels["gpu"] for s in gpus) == ["0", "1"]
            assert all(s.labels["UUID"] and s.labels["modelName"] for s in gpus)
        assert not [s for s in fams["DCGM_FI_DEV_GPU_UTIL"].samples
                    if s.labels["Hostname"] == "n4"]
    finally:
        post_state(c, "n2", {"state": "RESUME"})


def test_page_feed_and_node_detail(c: Cluster) -> None:
    page = get(c, "/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "web · Ranch" in page.text and "/static/app.js" in page.text
    for asset in ("/static/app.js", "/static/app.css"):
        assert get(c, asset).status_code == 200
    feed = get(c, "/ui/grid.json")
    doc = feed.json()
    assert doc["nodes"]["name"] == ["n1", "n2", "n3", "n4"]
    assert [p["name"] for p in doc["partitions"]] == ["main", "gpu"]
    assert doc["partitions"][1]["members"] == [0, 1, 2]
    assert {doc["states"][s] for s in doc["nodes"]["state"]} <= {"idle", "drained"}
    wait_for(lambda: get(c, "/ui/grid.json").json()["nodes"]["gpu"][0] >= 0,
             what="GPU figures in the feed")
    again = get(c, "/ui/grid.json", headers={"If-None-Match": feed.headers["etag"]})
    assert again.status_code in (200, 304)  # 304 unless a heartbeat made a new snapshot
    if again.status_code == 304:
        assert again.content == b""
    detail = get(c, "/ui/node/n1").json()
    assert detail["node"]["name"] == "n1" and len(detail["metrics"]["gpus"]) == 2
    assert get(c, "/ui/node/nope").status_code == 404
    assert get(c, "/no/such/route").status_code == 404


def test_metrics_show_the_guards_and_the_controllers_stalls(c: Cluster) -> None:
    r = get(c, "/metrics")
    fams = {f.name: f for f in text_string_to_metric_families(r.text)}
    tripped = {s.labels["guard"]: s.value for s in fams["ranch_guard_tripped"].samples}
    assert tripped == {"DownGuard": 0, "DrainGuard": 0}
    held = {s.labels["guard"]: s.value for s in fams["ranch_guard_nodes"].samples}
    assert held == {"DownGuard": 0, "DrainGuard": 0}
    assert fams["ranch_controller_stalls"].type == "counter"  # ranch_controller_stalls_total
    assert fams["ranch_controller_stall_seconds"].samples[0].value >= 0
    assert fams["ranch_controller_last_stall_seconds"].type == "gauge"


def test_metrics_and_rdiag_show_the_schedulers_statistics(c: Cluster) -> None:
    """sdiag's figures, the same counters read three ways: rdiag's blocks, rdiag --json and
    /metrics under prometheus-slurm-exporter's scheduler names."""
    from ranch.ctld.web.schedmetrics import FAMILIES

    text = cli(c, "ranch.cli.rdiag")
    assert text.startswith("Main schedule statistics (microseconds):\n\tLast cycle:   ")
    assert "\nBackfilling stats" in text and "\tLast table size: 0\n" in text
    stats = json.loads(cli(c, "ranch.cli.rdiag", "--json"))["statistics"]
    fams = {f.name: f for f in text_string_to_metric_families(get(c, "/metrics").text)}
    for name, field, _ in FAMILIES:
        assert fams[name].type == "gauge", name
        if field in ("bf_backfilled_jobs", "bf_backfilled_het_jobs"):  # no job waits here
            assert fams[name].samples[0].value == stats[field], name
    assert stats["bf_backfilled_het_jobs"] == 0 and stats["req_time"] >= stats["req_time_start"]


def test_reservations_in_the_api_metrics_rcontrol_and_rinfo(c: Cluster) -> None:
    """Issue 33: one maintenance window ahead, seen by every reader, then deleted."""
    out = cli(c, "ranch.cli.rcontrol", "create", "reservation", "ReservationName=fw",
              "StartTime=now+3600", "Duration=30", "Nodes=n4", "Flags=maint,ignore_jobs",
              "Users=root")
    assert out.strip() == "Reservation created: fw"
    try:
        api = get(c, "/api/v1/reservations").json()["reservations"]
        shown = json.loads(cli(c, "ranch.cli.rcontrol", "--json", "show", "reservation"))
        assert api == shown["reservations"]
        assert [(r["name"], r["state"], r["nodes"], r["flags"], r["duration"]) for r in api] == [
            ("fw", "INACTIVE", "n4", ["MAINT", "IGNORE_JOBS", "SPEC_NODES"], 1800.0)]
        fams = {f.name: f for f in text_string_to_metric_families(get(c, "/metrics").text)}
        by_state = {s.labels["state"]: s.value for s in fams["ranch_reservations"].samples}
        assert by_state == {"ACTIVE": 0, "INACTIVE": 1}
        nodes = fams["ranch_reservation_nodes"].samples
        assert [(s.labels["reservation"], s.value) for s in nodes] == [("fw", 1)]
        lines = cli(c, "ranch.cli.rinfo", "-T").splitlines()
        assert lines[0].split() == ["RESV_NAME", "STATE", "START_TIME", "END_TIME", "DURATION",
                                    "NODELIST"]
        assert lines[1].split()[:2] == ["fw", "INACTIVE"] and lines[1].split()[-2:] == [
            "00:30:00", "n4"]
        assert "ReservationName=fw " in cli(c, "ranch.cli.rcontrol", "show", "reservation", "fw")
    finally:
        cli(c, "ranch.cli.rcontrol", "delete", "ReservationName=fw")
    assert get(c, "/api/v1/reservations").json()["reservations"] == []
    assert cli(c, "ranch.cli.rinfo", "-T").strip() == "No reservations in the system"
