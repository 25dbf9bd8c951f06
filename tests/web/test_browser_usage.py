"""The page's Usage tab in a real headless chromium against real daemons (issues 43 and 45): the
association tree with `rshare -a --json`'s records, usage over time (a sample per
PriorityCalcPeriod: the chart draws one line per association once two have come), and the
pending jobs a limit holds, by QOS and account. PrivateData=usage cuts it as it cuts rshare:
bob, a user, sees his own associations' rows and usage only; carol, in no association, none;
alice, an admin, everything. Screenshots go to RANCH_SCREENSHOTS when it is set."""

from __future__ import annotations

import json
import pwd
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ranch.protocol import messages as m
from tests.web.cdp import Browser, find_chromium
from tests.web.http_cluster import OTHER_TOKEN, TOKEN, USER_TOKEN, cli
from tests.web.test_browser_views import (
    _cluster,
    _shot,
    _sign_in,
    _start,
    _states,
    _unnamed_controls,
)

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH (.ci/run installs Debian's `chromium` when run as root)")
ACCOUNTING = ("AccountingStorageType=accounting_storage/slurmdbd\n"
              "AccountingStorageEnforce=associations,limits,qos\nPriorityCalcPeriod=1\n")
TREE = ("-i add qos small MaxJobsPerUser=1", "-i add account physics", "-i add account chem",
        "-i add user alice account=physics",
        "-i add user bob account=chem,physics qos=normal,small")
STABLE = ("depth", "account", "user", "partition", "id", "raw_shares", "norm_shares")
ROWS = ("[...document.querySelectorAll('#u-share-rows tr')].filter(r => r.dataset.account)"
        ".map(r => [r.dataset.account, r.dataset.user, ...[...r.cells].map(x => x.textContent)])")


@contextmanager
def _removed(path: Path) -> Iterator[None]:
    try:
        yield
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _usage(b: Browser) -> dict:
    return b.js("fetch('/ui/usage', {headers: headers({})}).then(r => r.json())")


def _rshare(c) -> list[dict]:
    return json.loads(cli(c, "ranch.cli.rshare", "-a", "-l", "--json"))["shares"]


def test_usage_tab() -> None:
    # bob's job runs there: the cluster's spool and the work dir outside pytest's 0700 tmp_path
    base = Path(tempfile.mkdtemp(prefix="ranch-usage-"))
    base.chmod(0o755)
    with _removed(base):
        _usage_tab(base)


def _usage_tab(base: Path) -> None:
    c = _cluster(base / "cluster")
    c.conf_path.write_text(c.conf_path.read_text().replace(
        "PrivateData=jobs", "PrivateData=usage\n" + ACCOUNTING))
    tokens = c.dir / "tokens"
    tokens.write_text(tokens.read_text() + f"carol:{USER_TOKEN}\n")  # in no association
    bob = pwd.getpwnam("bob")
    work = base / "work"
    work.mkdir()
    work.chmod(0o1777)
    with c:
        _start(c)
        started = time.monotonic()
        for line in TREE:
            cli(c, "ranch.cli.racctmgr", *line.split())
        ids = []
        for _ in range(2):  # bob's QOS lets him run one job at a time
            reply = c.request(m.SubmitJob("#!/bin/sh\nsleep 300\n", "bob", bob.pw_uid,
                                          bob.pw_gid, str(work), name="sim", account="chem",
                                          qos="small"))
            assert isinstance(reply, m.SubmitReply), reply
            ids.append(reply.job_id)
        c.wait_for(lambda: sorted(_states(c).get(i, "") for i in ids) == ["PENDING", "RUNNING"],
                   20, what="one of bob's jobs RUNNING, one PENDING")
        pending = next(i for i in ids if _states(c)[i] == "PENDING")
        assert CHROMIUM is not None
        with Browser(CHROMIUM, height=1300) as b:
            b.open(c.http + "/#usage")  # type: ignore[attr-defined]
            b.js("window.cspViolations = []; document.addEventListener("
                 "'securitypolicyviolation', e => window.cspViolations.push("
                 "e.violatedDirective + ' ' + e.blockedURI))")
            b.wait_js("document.querySelectorAll('#grid .c').length === 4", what="the page")
            _sign_in(b, TOKEN)  # alice, an admin: every association
            b.wait_js("document.querySelectorAll('#u-share-rows tr[data-account]').length > 5",
                      what="the tree")
            # the page's records are rshare -a --json's (read between two calls that agree:
            # no calc period in between)
            for _ in range(5):
                before, doc, after = _rshare(c), _usage(b), _rshare(c)
                if before == after:
                    break
            assert doc["shares"] == before
            assert {(r["account"], r["user"]) for r in doc["shares"]} >= {
                ("root", ""), ("physics", ""), ("chem", ""), ("physics", "alice"),
                ("chem", "bob"), ("physics", "bob")}
            rows = b.js(ROWS)
            by = {(r["account"], r["user"]): r for r in doc["shares"]}
            for account, user, *cells in rows:
                rec = by[(account, user)]
                assert cells[0] == " " * rec["depth"] + account and cells[1] == user
            # the limit that holds bob's second job, by QOS and account
            limits = b.js("[...document.querySelectorAll('#u-limit-rows tr')].map(r =>"
                          " [...r.cells].map(x => x.textContent))")
            assert limits == [["small", "chem", "QOSMaxJobsPerUserLimit", "1", "bob",
                               str(pending)]]
            assert doc["hidden"] is None
            # the filter: one account's rows
            b.js("(() => { const i = document.getElementById('u-account'); i.value = 'chem';"
                 " i.dispatchEvent(new Event('input')); })()")
            assert {r[0] for r in b.js(ROWS)} == {"chem"}
            b.js("(() => { const i = document.getElementById('u-account'); i.value = '';"
                 " i.dispatchEvent(new Event('input')); })()")
            assert _unnamed_controls(b) == []

            # usage over time: a line per association once a second calc period has run
            # (PriorityCalcPeriod's least is a minute)
            b.wait_js("(async () => { await loadUsage();"
                      " return document.querySelectorAll('#u-chart polyline').length > 0; })()",
                      timeout=max(5.0, 100 - (time.monotonic() - started)),
                      what="two usage samples")
            doc = _usage(b)
            series = {(s["account"], s["user"]): s["values"] for s in doc["history"]["series"]}
            assert series[("chem", "bob")][-1] > 0  # his running job's CPU-seconds
            assert len(doc["history"]["times"]) >= 2
            legend = b.js("[...document.querySelectorAll('#u-legend li')]"
                          ".map(l => l.dataset.series)")
            assert "chem / bob" in legend and "root" in legend
            _shot(b, "usage-admin.png")

            # bob, a user under PrivateData=usage: his own associations only, as rshare as bob
            _sign_in(b, OTHER_TOKEN)
            b.js("location.hash = '#nodes'; location.hash = '#usage'")
            b.wait_js("[...document.querySelectorAll('#u-share-rows tr[data-account]')]"
                      ".every(r => r.dataset.user === 'bob') &&"
                      " document.querySelectorAll('#u-share-rows tr[data-account]').length === 2",
                      what="bob's rows only")
            mine = _usage(b)
            admin = {(r["account"], r["user"]): r for r in _rshare(c) if r["user"] == "bob"}
            assert [(r["account"], r["user"]) for r in mine["shares"]] == list(admin)
            for r in mine["shares"]:
                assert r["depth"] == 0  # no account row above it is shown (share_rows.py)
                assert {k: r[k] for k in STABLE[1:]} == {k: admin[(r["account"], r["user"])][k]
                                                        for k in STABLE[1:]}
            assert {s["user"] for s in mine["history"]["series"]} == {"bob"}
            assert "own associations" in b.js("document.getElementById('u-note').textContent")
            assert b.js("document.querySelectorAll('#u-limit-rows tr[data-reason]').length") == 1
            _shot(b, "usage-bob.png")

            # carol: in no association, no job: nothing
            _sign_in(b, USER_TOKEN)
            b.js("location.hash = '#nodes'; location.hash = '#usage'")
            b.wait_js("document.getElementById('u-shown').textContent === '0 of 0 associations'",
                      what="carol's empty tab")
            theirs = _usage(b)
            assert theirs["shares"] == [] and theirs["limits"] == []
            assert theirs["history"]["series"] == []
            assert b.js("window.cspViolations") == []
