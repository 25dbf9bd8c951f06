"""The page's node panel, job queue and job page in a real headless chromium against real daemons
(issue 45): the panel offers only what the node table accepts (a drained node: Resume, no Drain),
lists the node's jobs and its GPUs one row each; the queue is `rqueue --json`'s records, filtered
and sorted; a job's page has its script (owner or admin), GPUs, output and the commands its reader
may give, which go through rcancel's path; PrivateData=jobs hides other users' jobs as the CLI
does; every control has an accessible name (CDP Accessibility) and the grid is keyboard-driven.
Screenshots of each view go to RANCH_SCREENSHOTS when it is set."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import httpx
import pytest

from ranch.protocol import messages as m
from tests.integration.cluster import Cluster, free_port, wait_for
from tests.web.cdp import Browser, find_chromium
from tests.web.http_cluster import CONF, OTHER_TOKEN, TOKEN, _http_up, cli

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH (.ci/run installs Debian's `chromium` when run as root)")
GPUS = {"n1": 2, "n2": 2, "n3": 2}


def _cluster(workdir: Path) -> Cluster:
    """http_cluster's cluster with PrivateData=jobs and one admin (alice): bob is a user."""
    port, http_port = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    tokens = workdir / "tokens"
    tokens.write_text(f"alice:{TOKEN}\nbob:{OTHER_TOKEN}\n")
    os.chmod(tokens, 0o600)
    conf = CONF.format(port=port, http_port=http_port, extra="PrivateData=jobs\nKillWait=1")
    c = Cluster(workdir, nodes=["n1", "n2", "n3", "n4"],
                conf_text=conf.replace("AdminUsers=alice,bob", "AdminUsers=alice"))
    c.port, c.addr = port, ("127.0.0.1", port)
    c.http = f"http://127.0.0.1:{http_port}"  # type: ignore[attr-defined]
    return c


def _start(c: Cluster) -> None:
    c.start_ctld()
    wait_for(lambda: _http_up(c.http), what="rctld's HTTP server")  # type: ignore[attr-defined]
    for name in c.node_names:
        argv = ["-m", "ranch.noded", "--server", f"127.0.0.1:{c.port}", "--name", name,
                "--spool-dir", str(c.dir / "spool" / name)]
        if GPUS.get(name):
            argv += ["--fake-gpus", str(GPUS[name])]
        c.nodes[name] = c._spawn(name, argv)
    c.wait_for(lambda: all(c.state(n) == "IDLE" for n in c.node_names), 30,
               what="every node IDLE")


def _states(c: Cluster) -> dict[int, str]:
    doc = json.loads(cli(c, "ranch.cli.rqueue", "--json"))
    return {j["job_id"]: j["job_state"][0] for j in doc["jobs"]}


def _sign_in(b: Browser, token: str) -> None:
    b.js(f"""(() => {{ document.getElementById('b-signin').click();
        document.getElementById('tok-input').value = '{token}';
        document.getElementById('tok-ok').click(); }})()""")


def _unnamed_controls(b: Browser) -> list[str]:
    """Focusable controls of the page the accessibility tree gives no name (CDP)."""
    b.page("Accessibility.enable")
    nodes = b.page("Accessibility.getFullAXTree")["nodes"]
    roles = {"button", "link", "combobox", "textbox", "searchbox", "listbox", "checkbox"}
    out = []
    for n in nodes:
        role = (n.get("role") or {}).get("value")
        if n.get("ignored") or role not in roles:
            continue
        if not str((n.get("name") or {}).get("value") or "").strip():
            out.append(f"{role} (backend node {n.get('backendDOMNodeId')})")
    return out


def _shot(b: Browser, name: str) -> None:
    where = os.environ.get("RANCH_SCREENSHOTS")
    if where:
        os.makedirs(where, exist_ok=True)
        b.screenshot(os.path.join(where, name))


def test_node_panel_queue_and_job_page(tmp_path) -> None:
    c = _cluster(tmp_path / "cluster")
    bob = pwd.getpwnam("bob")
    work = tmp_path / "work"
    work.mkdir(mode=0o777)
    os.chmod(work, 0o777)
    with c:
        _start(c)
        running = int(cli(c, "ranch.cli.rbatch", "--parsable", "-D", str(work), "-J", "train",
                          "--gpus", "1", "-w", "n1", "-t", "30",
                          "--wrap", "sleep 120").split(";")[0])
        reply = c.request(m.SubmitJob("#!/bin/sh\n# bob's analysis\necho hi\n", "bob",
                                      bob.pw_uid, bob.pw_gid, str(work), name="bobs",
                                      hold=True))
        assert isinstance(reply, m.SubmitReply), reply
        held = reply.job_id
        c.wait_for(lambda: _states(c).get(running) == "RUNNING", 20, what="the job RUNNING")
        cli(c, "ranch.cli.rcontrol", "update", "NodeName=n2", "State=DRAIN", "Reason=bad fan")
        show = json.loads(cli(c, "ranch.cli.rcontrol", "show", "job", str(running), "--json"))
        (shown,) = show["jobs"]
        assert shown["gres_detail"]
        gpu_idx = int(shown["gres_detail"][0].split("IDX:")[1].rstrip(")"))
        queue_cli = json.loads(cli(c, "ranch.cli.rqueue", "--json"))["jobs"]
        assert CHROMIUM is not None
        with Browser(CHROMIUM, height=1000) as b:
            b.open(c.http + "/")  # type: ignore[attr-defined]
            b.js("window.cspViolations = []; document.addEventListener("
                 "'securitypolicyviolation', e => window.cspViolations.push("
                 "e.violatedDirective + ' ' + e.blockedURI))")
            b.wait_js("document.querySelectorAll('#grid .c').length === 4", what="the grid")
            _sign_in(b, TOKEN)  # alice, the admin
            b.wait_js("document.getElementById('jobs-running').textContent === '1' &&"
                      " document.getElementById('jobs-pending').textContent === '1'",
                      what="the header counting every job")

            # Keyboard: the grid is one tab stop; ArrowRight opens the first node, n1.
            b.js("document.getElementById('grid').focus()")
            b.page("Input.dispatchKeyEvent", {"type": "keyDown", "key": "ArrowRight",
                                              "code": "ArrowRight", "windowsVirtualKeyCode": 39})
            b.wait_js("document.getElementById('p-name').textContent === 'n1'", what="n1 open")
            # n1: Drain only (idle/mixed, not drained); its job; its GPUs one row each.
            b.wait_js("document.querySelectorAll('#p-gpus tr').length === 2", what="n1's GPUs")
            b.wait_js(f"document.getElementById('p-jobs').textContent.includes('{running}')",
                      what="n1's job")
            assert b.js("[document.getElementById('b-drain').hidden,"
                        " document.getElementById('b-resume').hidden]") == [False, True]
            gpus = b.js("[...document.querySelectorAll('#p-gpus tr')].map(r =>"
                        " [...r.cells].map(x => x.textContent))")
            assert [g[0] for g in gpus] == ["0", "1"]
            assert gpus[gpu_idx][2] == str(running) and gpus[1 - gpu_idx][2] == "free"
            assert all(g[3].endswith("%") and g[5].endswith("°C") and g[6] == "ok" for g in gpus)
            _shot(b, "node-n1-gpus.png")

            # n2, drained by rcontrol: Resume, not Drain; the reason and who set it.
            b.js("document.querySelector('#grid .c[data-name=n2]').click()")
            b.wait_js("!document.getElementById('b-resume').hidden", what="Resume on n2")
            assert b.js("document.getElementById('b-drain').hidden") is True
            assert "bad fan" in b.js("document.getElementById('p-reason').textContent")
            _shot(b, "node-n2-drained.png")

            # The queue: rqueue --json's records; filter by user, sort by id.
            b.js("location.hash = '#jobs'")
            b.wait_js("document.querySelectorAll('#queue-rows tr').length === 2", what="queue")
            rows = b.js("[...document.querySelectorAll('#queue-rows tr')].map(r =>"
                        " [r.dataset.id, r.dataset.state, r.cells[2].textContent,"
                        " r.cells[7].textContent])")
            want = {str(j["job_id"]): j for j in queue_cli}
            assert {r[0] for r in rows} == set(want)
            for jid, state, user, where in rows:
                j = want[jid]
                assert state == j["job_state"][0] and user == j["user_name"]
                assert where == (j["nodes"] if state == "RUNNING" else f"({j['state_reason']})")
            b.js("(() => { const s = document.getElementById('j-user'); s.value = 'bob';"
                 " s.dispatchEvent(new Event('change')); })()")
            assert b.js("[...document.querySelectorAll('#queue-rows tr')]"
                        ".map(r => r.dataset.id)") == [str(held)]
            b.js("(() => { const s = document.getElementById('j-user'); s.value = '';"
                 " s.dispatchEvent(new Event('change'));"
                 " document.querySelector('.sort[data-key=job_id]').click(); })()")
            assert b.js("[...document.querySelectorAll('#queue-rows tr')].map(r => r.dataset.id)"
                        ) == [str(held), str(running)]  # descending after the second sort
            _shot(b, "queue-admin.png")
            assert _unnamed_controls(b) == []

            # Kept up to date by what changed since its listing (/ui/queue?since=): a job
            # submitted now appears, and its cancellation shows, with no whole refetch.
            b.js("performance.clearResourceTimings()")
            late = int(cli(c, "ranch.cli.rbatch", "--parsable", "-D", str(work), "-H",
                           "--wrap", "true").split(";")[0])
            b.wait_js(f"!!document.querySelector('#queue-rows tr[data-id=\"{late}\"]')",
                      what="the job submitted after the tab opened")
            cli(c, "ranch.cli.rcancel", str(late))
            b.wait_js(f"document.querySelector('#queue-rows tr[data-id=\"{late}\"]')"
                      ".dataset.state === 'CANCELLED'", what="its cancellation")
            asked = b.js("performance.getEntriesByType('resource').map(e => e.name)"
                         ".filter(n => n.includes('/ui/queue'))")
            assert asked and all("since=" in n for n in asked), asked

            # The running job's page: script, GPUs, output, and what an admin may do.
            b.js(f"location.hash = '#job/{running}'")
            b.wait_js("document.getElementById('jd-script').textContent.startsWith('#!')",
                      what="the script's first lines")
            facts = b.js("Object.fromEntries([...document.querySelectorAll('#jd-facts dt')]"
                         ".map(d => [d.textContent, d.nextElementSibling.textContent]))")
            assert facts["Nodes"] == "n1" and facts["GPUs"] == f"n1: {gpu_idx}"
            text = cli(c, "ranch.cli.rcontrol", "show", "job", str(running))
            stdout = next(w for w in text.split() if w.startswith("StdOut="))
            assert facts["Output"] == stdout.removeprefix("StdOut=")
            assert b.js("[...document.querySelectorAll('#jd-actions button')].map(x => x.id)"
                        ) == ["ja-cancel", "ja-requeue"]
            _shot(b, "job-running-admin.png")
            assert _unnamed_controls(b) == []
            b.js("location.hash = '#nodes'")
            assert _unnamed_controls(b) == []

            # bob, a user: PrivateData=jobs shows him his own job only, no node buttons.
            _sign_in(b, OTHER_TOKEN)
            b.js("location.hash = '#jobs'")
            b.wait_js("document.querySelectorAll('#queue-rows tr').length === 1 &&"
                      f" document.querySelector('#queue-rows tr').dataset.id === '{held}'",
                      what="bob's own job only")
            _shot(b, "queue-bob.png")
            b.wait_js("document.getElementById('jobs-running').textContent === '0' &&"
                      " document.getElementById('jobs-pending').textContent === '1'",
                      what="the header counting bob's jobs only")
            b.js(f"location.hash = '#job/{running}'")
            b.wait_js("!document.getElementById('jd-error').hidden", what="a refusal")
            assert "no such job" in b.js("document.getElementById('jd-error').textContent")
            r = httpx.post(f"{c.http}/ui/job/{running}/cancel",  # type: ignore[attr-defined]
                           headers={"Authorization": f"Bearer {OTHER_TOKEN}"}, timeout=10)
            assert r.status_code == 403 and "permission denied" in r.text.lower()
            b.js(f"location.hash = '#job/{held}'")
            b.wait_js("document.getElementById('jd-script').textContent.includes("
                      "\"bob's analysis\")", what="bob's own script")
            assert b.js("[...document.querySelectorAll('#jd-actions button')].map(x => x.id)"
                        ) == ["ja-cancel", "ja-release"]
            _shot(b, "job-held-bob.png")
            b.js("document.getElementById('ja-cancel').click()")  # arms it
            b.js("document.getElementById('ja-cancel').click()")  # confirms
            b.wait_js("document.getElementById('jd-state').textContent.startsWith('CANCELLED')",
                      what="bob's job cancelled")
            b.js("location.hash = '#nodes'")
            b.js("document.querySelector('#grid .c[data-name=n3]').click()")
            b.wait_js("document.getElementById('p-noact').textContent.includes('admin')",
                      what="no node buttons for bob")
            assert b.js("document.getElementById('b-drain').hidden") is True
            _shot(b, "node-n3-bob.png")
            assert b.js("window.cspViolations") == []
        after = json.loads(cli(c, "ranch.cli.rcontrol", "show", "job", str(held), "--json"))
        assert after["jobs"][0]["job_state"] == ["CANCELLED"]  # bob's click, rcancel's path
        assert _states(c)[running] == "RUNNING"
        cli(c, "ranch.cli.rcancel", str(running))
