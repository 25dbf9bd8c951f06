"""The page's History tab, event timeline, admin actions and change stream in a real headless
chromium against real daemons (issue 45): the history's filters show what racct shows for the
same records and PrivateData=jobs cuts it as it cuts racct's; a drain made by rcontrol reaches an
open page through /ui/stream without a refetch of the grid (fetches counted) and shows in the
timeline; reboot and reservations need an admin, are offered only where valid, and go through
rcontrol's handlers. Every control has an accessible name. Screenshots go to RANCH_SCREENSHOTS."""

from __future__ import annotations

import json
import os
import pwd
import time
from pathlib import Path

import httpx
import pytest

from ranch.protocol import messages as m
from tests.integration.cluster import Cluster, free_port
from tests.web.cdp import Browser, find_chromium
from tests.web.http_cluster import CONF, OTHER_TOKEN, TOKEN, _http_up, cli
from tests.web.test_browser_views import _shot, _sign_in, _start, _unnamed_controls

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH (.ci/run installs Debian's `chromium` when run as root)")
FINAL = "CD,F,CA,TO,NF,OOM,DL,BF,PR"


def _cluster(workdir: Path) -> Cluster:
    """PrivateData=jobs, one admin (alice; bob is a user), and a RebootProgram."""
    port, http_port = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    tokens = workdir / "tokens"
    tokens.write_text(f"alice:{TOKEN}\nbob:{OTHER_TOKEN}\n")
    os.chmod(tokens, 0o600)
    conf = CONF.format(port=port, http_port=http_port,
                       extra="PrivateData=jobs\nKillWait=1\nRebootProgram=/bin/true")
    c = Cluster(workdir, nodes=["n1", "n2", "n3", "n4"],
                conf_text=conf.replace("AdminUsers=alice,bob", "AdminUsers=alice"))
    c.port, c.addr = port, ("127.0.0.1", port)
    c.http = f"http://127.0.0.1:{http_port}"  # type: ignore[attr-defined]
    return c


def _racct_ids(c: Cluster, *args: str) -> list[str]:
    """racct's finished jobs (its -s last wins, so a test's own -s narrows it)."""
    out = cli(c, "ranch.cli.racct", "-a", "-X", "-n", "-P", "-o", "JobID", "-s", FINAL, *args)
    return sorted(out.split(), key=int)


def _page_ids(b: Browser) -> list[str]:
    return sorted(b.js("[...document.querySelectorAll('#history-rows tr[data-id]')]"
                       ".map(r => r.dataset.id)"), key=int)


def _search(b: Browser, **values: str) -> None:
    sets = "".join(f"document.getElementById('h-{k}').value = {json.dumps(v)};"
                   for k, v in values.items())
    b.js(f"(() => {{ {sets} document.getElementById('h-shown').textContent = '';"
         " document.getElementById('h-go').click(); })()")
    b.wait_js("document.getElementById('h-shown').textContent.endsWith('jobs')",
              what="the history's answer")


def _local(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(t))


def test_history_timeline_admin_actions_and_stream(tmp_path) -> None:
    c = _cluster(tmp_path / "cluster")
    bob = pwd.getpwnam("bob")
    work = tmp_path / "work"
    work.mkdir(mode=0o777)
    os.chmod(work, 0o777)
    with c:
        _start(c)
        mine = [int(cli(c, "ranch.cli.rbatch", "--parsable", "-D", str(work), "-A", acct,
                        "-J", f"a-{acct}", "--wrap", cmd).split(";")[0])
                for acct, cmd in (("physics", "true"), ("physics", "exit 3"), ("chem", "true"))]
        bobs = []
        for acct in ("chem", "bio"):
            reply = c.request(m.SubmitJob("#!/bin/sh\ntrue\n", "bob", bob.pw_uid, bob.pw_gid,
                                          str(work), name="bobs", account=acct))
            assert isinstance(reply, m.SubmitReply), reply
            bobs.append(reply.job_id)
        everyone = {str(j) for j in mine + bobs}
        c.wait_for(lambda: set(_racct_ids(c, "-S", "now-1hours", "-E", "now")) == everyone, 30,
                   what="every job finished")
        assert CHROMIUM is not None
        with Browser(CHROMIUM, height=1000) as b:
            b.open(c.http + "/")  # type: ignore[attr-defined]
            b.js("window.cspViolations = []; document.addEventListener("
                 "'securitypolicyviolation', e => window.cspViolations.push("
                 "e.violatedDirective + ' ' + e.blockedURI))")
            b.wait_js("document.querySelectorAll('#grid .c').length === 4", what="the grid")
            _sign_in(b, TOKEN)  # alice, the admin

            # -- the change stream: a drain by rcontrol reaches the open page, no refetch
            b.wait_js("streamLive === true", what="the stream open")
            before = b.js("changes")
            b.js("window.fetched = []; const f0 = window.fetch; window.fetch = (u, o) =>"
                 " { window.fetched.push(String(u)); return f0(u, o); }")
            cli(c, "ranch.cli.rcontrol", "update", "NodeName=n2", "State=DRAIN",
                "Reason=bad fan")
            b.wait_js("document.querySelector('#grid .c[data-name=n2]').dataset.state"
                      " === 'drained'", what="n2 drained on the page")
            fetched = b.js("window.fetched")
            assert not [u for u in fetched if "grid.json" in u or "/api/v1/nodes" in u], fetched
            assert b.js("changes") > before  # it came as a frame of the stream
            # a job submitted (no node changes state): the header's counts follow, still with
            # no refetch of the grid (the stream looks at the job store's generation)
            cli(c, "ranch.cli.rbatch", "-H", "-D", str(work), "--wrap", "true")
            b.wait_js("document.getElementById('jobs-pending').textContent === '1'",
                      what="the pending count from the stream")
            fetched = b.js("window.fetched")
            assert not [u for u in fetched if "grid.json" in u or "/api/v1/nodes" in u], fetched
            _shot(b, "p2-live-drain.png")

            # -- history: the filters show what racct shows for the same window
            lo, hi = _local(time.time() - 3600), _local(time.time() + 600)
            b.js("location.hash = '#history'")
            _search(b, start=lo, end=hi)
            assert _page_ids(b) == _racct_ids(c, "-S", lo, "-E", hi) == sorted(everyone, key=int)
            _search(b, user="bob")
            assert _page_ids(b) == _racct_ids(c, "-S", lo, "-E", hi, "-u", "bob") == sorted(
                map(str, bobs), key=int)
            _search(b, user="", account="physics")
            assert _page_ids(b) == _racct_ids(c, "-S", lo, "-E", hi, "-A", "physics") == [
                str(j) for j in mine[:2]]
            exits = b.js("[...document.querySelectorAll('#history-rows tr')].map(r =>"
                         " r.dataset.state + ' ' + r.cells[6].textContent)")
            assert sorted(exits) == ["COMPLETED 0:0", "FAILED 3:0"]
            _search(b, account="", state="FAILED")
            assert _page_ids(b) == _racct_ids(c, "-S", lo, "-E", hi, "-s", "F")
            assert str(mine[1]) in _page_ids(b)
            later = _local(time.time() + 3600)
            _search(b, state="", start=later, end=_local(time.time() + 7200))
            assert _page_ids(b) == [] == _racct_ids(c, "-S", later, "-E",
                                                     _local(time.time() + 7200))
            _search(b, start=lo, end=hi)
            _shot(b, "p2-history-admin.png")
            assert _unnamed_controls(b) == []

            # -- the timeline: the drain rcontrol made, filtered by node and kind
            b.js("location.hash = '#events'")
            b.wait_js("document.querySelectorAll('#timeline li.ev').length > 0", what="events")
            b.js("(() => { const k = document.getElementById('e-kind'); k.value = 'drain';"
                 " k.dispatchEvent(new Event('change')); })()")
            b.wait_js("[...document.querySelectorAll('#timeline li.ev')].every(l =>"
                      " l.dataset.kind === 'drain') && !!document.querySelector('#timeline li.ev')",
                      what="drains only")
            line = b.js("document.querySelector('#timeline li.ev').textContent")
            assert "n2" in line and "bad fan" in line and "DRAIN" in line
            log = json.loads(cli(c, "ranch.cli.rcontrol", "events", "--json"))
            drains = [e for e in (log["events"] if isinstance(log, dict) else log)
                      if e.get("kind") == "state" and e["node"] == "n2" and "DRAIN" in e["new"]]
            assert len(drains) == b.js("document.querySelectorAll('#timeline li.ev').length")
            b.js("(() => { const n = document.getElementById('e-node'); n.value = 'n1';"
                 " n.dispatchEvent(new Event('change')); })()")
            b.wait_js("document.getElementById('timeline').textContent.includes("
                      "'no event matches')", what="no drain of n1")
            b.js("(() => { for (const [id, v] of [['e-node', ''], ['e-kind', '']]) {"
                 " const x = document.getElementById(id); x.value = v;"
                 " x.dispatchEvent(new Event('change')); } })()")
            b.wait_js("document.querySelectorAll('#timeline li.ev').length > 1", what="all")
            _shot(b, "p2-events-timeline.png")
            assert _unnamed_controls(b) == []

            # -- reboot: offered on an idle node, through rcontrol reboot's handler
            b.js("location.hash = '#nodes'")
            b.js("document.querySelector('#grid .c[data-name=n3]').click()")
            b.wait_js("!document.getElementById('b-reboot').hidden", what="Reboot on n3")
            b.js("document.getElementById('b-reboot').click()")
            b.js("document.getElementById('rb-reason').value = 'new kernel'")
            _shot(b, "p2-reboot-dialog.png")
            assert _unnamed_controls(b) == []
            b.js("document.getElementById('rb-ok').click()")
            c.wait_for(lambda: "REBOOT" in c.state("n3"), 10, what="n3's reboot requested")
            b.wait_js("document.getElementById('b-reboot').hidden &&"
                      " document.getElementById('p-state').textContent !== 'idle'",
                      what="no second reboot offered")
            shown = cli(c, "ranch.cli.rcontrol", "show", "node", "n3")
            assert "new kernel" in shown
            b.js("location.hash = '#events'")  # the timeline has it, under reboot
            b.js("(() => { const k = document.getElementById('e-kind'); k.value = 'reboot';"
                 " k.dispatchEvent(new Event('change')); })()")
            b.wait_js("[...document.querySelectorAll('#timeline li.ev')].some(l =>"
                      " l.dataset.node === 'n3' && l.textContent.includes('new kernel')) &&"
                      " [...document.querySelectorAll('#timeline li.ev')].every(l =>"
                      " l.dataset.kind === 'reboot')", what="n3's reboot, reboots only")
            _shot(b, "p2-events-reboot.png")
            b.js("location.hash = '#nodes'")

            # -- reservations: created and deleted from the page, rcontrol's handler
            b.wait_js("!document.getElementById('b-resv-new').hidden", what="New reservation")
            b.js("document.getElementById('b-resv-new').click()")
            b.js("(() => { const v = {'rs-name': 'maint_n4', 'rs-nodes': 'n4',"
                 " 'rs-duration': '60', 'rs-flags': 'MAINT'};"
                 " for (const k in v) document.getElementById(k).value = v[k]; })()")
            _shot(b, "p2-reservation-dialog.png")
            assert _unnamed_controls(b) == []
            b.js("document.getElementById('rs-ok').click()")
            b.wait_js("!!document.querySelector('#resv-rows tr[data-name=maint_n4]')",
                      what="the reservation listed")
            shown = cli(c, "ranch.cli.rcontrol", "show", "reservation", "maint_n4")
            assert "Nodes=n4" in shown and "MAINT" in shown and "Users=alice" in shown
            _shot(b, "p2-reservations-admin.png")
            assert _unnamed_controls(b) == []
            b.js("document.querySelector('#resv-rows tr[data-name=maint_n4] button').click()")
            b.wait_js("document.querySelector('#resv-rows tr[data-name=maint_n4] button')"
                      ".textContent === 'Confirm delete'", what="the delete to confirm")
            b.js("(async () => { await pollReservations(); return 1; })()")  # a poll redraws
            assert b.js("document.querySelector('#resv-rows tr[data-name=maint_n4] button')"
                        ".textContent") == "Confirm delete"  # and keeps the admin's first click
            b.js("document.querySelector('#resv-rows tr[data-name=maint_n4] button').click()")
            b.wait_js("!document.querySelector('#resv-rows tr[data-name=maint_n4]')",
                      what="the reservation gone")
            assert "maint_n4" not in c.run_cli("ranch.cli.rcontrol", "show",
                                               "reservation").stdout

            # -- bob, a user: his own history only; no admin controls, and the routes refuse
            _sign_in(b, OTHER_TOKEN)
            b.wait_js("document.getElementById('b-resv-new').hidden", what="no New for bob")
            b.js("location.hash = '#history'")
            _search(b, user="", account="", state="", start=lo, end=hi)
            assert _page_ids(b) == sorted(map(str, bobs), key=int)
            assert "bob" in b.js("document.getElementById('h-note').textContent")
            _shot(b, "p2-history-bob.png")
            b.js("location.hash = '#nodes'")
            b.js("document.querySelector('#grid .c[data-name=n1]').click()")
            b.wait_js("document.getElementById('p-noact').textContent.includes('admin')",
                      what="no node buttons for bob")
            assert b.js("document.getElementById('b-reboot').hidden") is True
            assert b.js("window.cspViolations") == []
        auth = {"Authorization": f"Bearer {OTHER_TOKEN}"}
        r = httpx.post(f"{c.http}/ui/node/n1/reboot", json={}, headers=auth,  # type: ignore
                       timeout=10)
        assert r.status_code == 403 and "admin" in r.text
        r = httpx.post(f"{c.http}/ui/reservations",  # type: ignore[attr-defined]
                       json={"nodes": "n4", "duration": "60", "users": ["bob"]}, headers=auth,
                       timeout=10)
        assert r.status_code == 403
        assert "REBOOT" not in c.state("n1")
        assert _http_up(c.http)  # type: ignore[attr-defined]
