"""The routes behind the page's History tab, timeline, admin actions and stream, over real HTTP
against a real rctld (issue 45): the rights are the CLI's (PrivateData=events hides the log from
users, PrivateData=jobs cuts the history, admin actions need an admin), the handlers' own errors
come back, and a stream frame carries the changed node's row. The timeline's categories are
checked against event records as the controller writes them."""

from __future__ import annotations

import json

import httpx

from ranch.ctld.web.panes import category
from tests.web.http_cluster import TOKEN, USER_TOKEN, cli, http_cluster, start

ADMIN = {"Authorization": f"Bearer {TOKEN}"}
USER = {"Authorization": f"Bearer {USER_TOKEN}"}


def test_categories_of_event_records() -> None:
    def state(old: str, new: str, cause: str) -> dict:
        return {"kind": "state", "node": "n1", "old": old, "new": new, "cause": cause}

    assert category(state("IDLE", "IDLE+DRAIN", "admin:alice")) == "drain"
    assert category(state("IDLE+DRAIN", "IDLE", "admin:alice")) == "resume"
    assert category(state("DOWN", "IDLE", "registration")) == "resume"
    assert category(state("IDLE", "IDLE+DRAIN", "healthcheck")) == "health"
    assert category(state("IDLE", "IDLE+REBOOT_REQUESTED", "admin:alice")) == "reboot"
    assert category(state("IDLE", "DOWN+NOT_RESPONDING", "heartbeat_missed")) == "down"
    assert category(state("IDLE", "ALLOCATED", "allocation")) == "jobs"
    assert category({"kind": "guard_tripped", "node": "-"}) == "guard"
    assert category({"kind": "controller_restart", "node": "-"}) == "controller"
    assert category({"kind": "reservation", "node": "-"}) == "reservation"
    assert category({"kind": "registered", "node": "n1"}) == "membership"


def test_rights_errors_and_the_stream(tmp_path) -> None:
    c = http_cluster(tmp_path, extra="PrivateData=events,jobs")
    base = c.http  # type: ignore[attr-defined]
    with c:
        start(c)
        cli(c, "ranch.cli.rcontrol", "update", "NodeName=n2", "State=DRAIN", "Reason=psu")
        # the timeline: admins only under PrivateData=events; filters by node and kind
        r = httpx.get(f"{base}/ui/events", headers=USER, timeout=10)
        assert r.status_code == 403 and "PrivateData=events" in r.text
        r = httpx.get(f"{base}/ui/events?node=n2&kind=drain", headers=ADMIN, timeout=10)
        assert r.status_code == 200
        (ev,) = r.json()["events"]
        assert (ev["node"], ev["reason"], ev["category"]) == ("n2", "psu", "drain")
        assert httpx.get(f"{base}/ui/events?kind=nonsense", headers=ADMIN,
                         timeout=10).status_code == 400
        # the history: no token under PrivateData=jobs shows nothing, and says why
        doc = httpx.get(f"{base}/ui/history", timeout=10).json()
        assert doc["jobs"] == [] and "PrivateData" in doc["hidden"]
        assert httpx.get(f"{base}/ui/history?state=RUNNING", headers=ADMIN,
                         timeout=10).status_code == 400
        # admin actions: a user is refused; the handler's own error comes back to an admin
        r = httpx.post(f"{base}/ui/node/n1/reboot", json={}, headers=USER, timeout=10)
        assert r.status_code == 403
        r = httpx.post(f"{base}/ui/node/n1/reboot", json={}, headers=ADMIN, timeout=10)
        assert r.status_code == 400 and "RebootProgram isn't defined" in r.text
        assert httpx.get(f"{base}/ui/node/n1", headers=ADMIN,
                         timeout=10).json()["actions"] == ["DRAIN"]  # no Reboot offered
        body = {"name": "w1", "nodes": "n4", "duration": "30", "users": ["alice"]}
        assert httpx.post(f"{base}/ui/reservations", json=body, headers=USER,
                          timeout=10).status_code == 403
        r = httpx.post(f"{base}/ui/reservations", json=body, headers=ADMIN, timeout=10)
        assert r.status_code == 200 and r.json()["name"] == "w1", r.text
        shown = json.loads(cli(c, "ranch.cli.rcontrol", "show", "reservation", "--json"))
        assert [x["name"] for x in shown["reservations"]] == ["w1"]
        r = httpx.post(f"{base}/ui/reservations", json=body, headers=ADMIN, timeout=10)
        assert r.status_code == 400  # the same name again: the handler's refusal
        assert httpx.post(f"{base}/ui/reservations/w1/delete", headers=ADMIN,
                          timeout=10).status_code == 200
        # the stream: hello, then the frame of a change with the node's row
        with httpx.stream("GET", f"{base}/ui/stream", headers=ADMIN, timeout=20) as s:
            lines = s.iter_lines()
            assert next(lines).startswith("retry:")
            assert next(lines).startswith("id:")
            assert next(lines) == "event: hello"
            next(lines)
            cli(c, "ranch.cli.rcontrol", "update", "NodeName=n3", "State=DRAIN", "Reason=fan")
            frame = {}
            for line in lines:
                if line.startswith("data:") and '"n3"' in line:
                    frame = json.loads(line[5:])
                    break
        row = frame["nodes"]["n3"]
        assert row["long"] == "drained" and row["reason"][0] == "fan"
        assert any(e["category"] == "drain" for e in frame["events"])
        with httpx.stream("GET", f"{base}/ui/stream", headers=USER, timeout=20) as s:
            hello = next(ln for ln in s.iter_lines() if ln.startswith("data:"))
            assert json.loads(hello[5:])["events"] is False  # no records for this reader


def test_open_pages_share_one_seat_of_the_event_log() -> None:
    """Every page's stream is fed through one follower of the log (web/live.py Hub), so open
    pages never use up the seats `rcontrol events --follow` is capped to, and each page still
    gets every event in its own bounded queue."""
    from ranch.ctld.nodes.eventlog import EventLog, Follower
    from ranch.ctld.web.live import Hub

    log, hub = EventLog(), Hub()
    pages = [Follower() for _ in range(40)]
    hub.streams.update(pages)
    log.followers.add(hub)
    log.add("state", "n1", old="IDLE", new="IDLE+DRAIN", cause="admin:alice")
    assert len(log.followers) == 1
    assert all([r["node"] for r in p.queue] == ["n1"] for p in pages)
