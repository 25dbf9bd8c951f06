"""The web page in a real headless chromium against real daemons: the grid shows every node, and a
drain done with the page's own dialog (reason + token) appears in `rinfo -R`."""

from __future__ import annotations

import json
import os

import pytest

from tests.integration.cluster import Cluster
from tests.web.cdp import Browser, find_chromium
from tests.web.http_cluster import TOKEN, cli, http_cluster, start

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH (.ci/run installs Debian's `chromium` when run as root)")


def test_page_shows_the_grid_and_drains_a_node(tmp_path) -> None:
    c: Cluster = http_cluster(tmp_path / "cluster")
    with c:
        start(c)
        assert CHROMIUM is not None
        with Browser(CHROMIUM) as b:
            b.open(c.http + "/")  # type: ignore[attr-defined]
            # The page's CSP (ctld/web/app.py) must not block anything the page itself does.
            b.js("window.cspViolations = []; document.addEventListener("
                 "'securitypolicyviolation', e => window.cspViolations.push("
                 "e.violatedDirective + ' ' + e.blockedURI))")
            names = b.wait_js(
                "(() => { const cs = [...document.querySelectorAll('#grid .c')];"
                " return cs.length === 4 && cs.every(x => x.dataset.state === 'idle')"
                " && JSON.stringify(cs.map(x => x.dataset.name)); })()",
                what="4 idle nodes in the grid")
            assert json.loads(names) == ["n1", "n2", "n3", "n4"]
            assert b.js("document.getElementById('total').textContent") == "4"
            chips = b.js("[...document.querySelectorAll('#counts .chip')]"
                         ".map(x => x.textContent)")
            assert chips == ["idle4"]

            # Select n2, open the Drain dialog, give a reason and the token, submit.
            b.js("document.querySelector('#grid .c[data-name=n2]').click()")
            assert b.js("document.getElementById('p-name').textContent") == "n2"
            b.wait_js("document.querySelectorAll('#p-facts .bar i').length > 0",
                      what="the panel's bars")
            assert b.js("[...document.querySelectorAll('#p-facts .bar i')]"
                        ".every(i => i.style.width.endsWith('%'))")
            b.js("document.getElementById('b-drain').click()")
            assert b.js("document.getElementById('dlg').open") is True
            b.js("document.getElementById('dlg-ok').click()")  # no reason yet: refused
            b.wait_js("!document.getElementById('dlg-error').hidden", what="reason error")
            b.js(f"""(() => {{
                document.getElementById('dlg-reason').value = 'bad DIMM in slot 3';
                document.getElementById('dlg-token').value = '{TOKEN}';
                document.getElementById('dlg-ok').click(); }})()""")
            b.wait_js("document.querySelector('#grid .c[data-name=n2]').dataset.state"
                      " === 'drained'", what="n2 drained in the grid")
            b.wait_js("document.getElementById('p-reason').textContent"
                      ".startsWith('bad DIMM in slot 3')", what="the reason in the panel")
            assert "alice" in b.js("document.getElementById('p-reason').textContent")
            assert b.js("window.cspViolations") == []
            if os.environ.get("RANCH_SCREENSHOTS"):
                b.screenshot(os.path.join(os.environ["RANCH_SCREENSHOTS"], "page.png"))

        listing = cli(c, "ranch.cli.rinfo", "-R", "-h", "-o", "%N|%E|%u")
        assert "n2|bad DIMM in slot 3|alice" in listing.splitlines()
        assert c.state("n2") == "IDLE+DRAIN"


def test_page_asks_for_a_token_when_reads_need_one(tmp_path) -> None:
    c: Cluster = http_cluster(tmp_path / "cluster", extra="HttpAuth=token")
    with c:
        start(c)
        assert CHROMIUM is not None
        with Browser(CHROMIUM) as b:
            b.open(c.http + "/")  # type: ignore[attr-defined]
            b.wait_js("!document.getElementById('notice').hidden &&"
                      " document.querySelector('#notice input') !== null", what="token prompt")
            assert b.js("document.querySelectorAll('#grid .c').length") == 0
            b.js(f"""(() => {{ document.querySelector('#notice input').value = '{TOKEN}';
                     document.querySelector('#notice button').click(); }})()""")
            b.wait_js("document.querySelectorAll('#grid .c[data-state=idle]').length === 4",
                      what="the grid once the token is given")
