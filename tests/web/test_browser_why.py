"""The job page's Why block and GET /api/v1/jobs/{id}/why in a real headless chromium against
real daemons (issue 44): a pending job's page says what holds it, with the drained node and its
reason, the estimate and what would start it sooner, as `rqueue --why` does; the API path answers
to whom rqueue would (PrivateData=jobs: the owner and admins). Screenshots go to
RANCH_SCREENSHOTS when it is set."""

from __future__ import annotations

import json
import os

import httpx
import pytest

from tests.web.cdp import Browser, find_chromium
from tests.web.http_cluster import OTHER_TOKEN, TOKEN, cli
from tests.web.test_browser_views import _cluster, _sign_in, _start

CHROMIUM = find_chromium()


def _why(c, job: int, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{c.http}/api/v1/jobs/{job}/why", headers=headers, timeout=10)


def test_the_job_page_says_why_a_job_waits(tmp_path) -> None:
    c = _cluster(tmp_path / "cluster")  # PrivateData=jobs; alice an admin, bob a user
    with c:
        _start(c)
        cli(c, "ranch.cli.rcontrol", "update", "NodeName=n4", "State=DRAIN", "Reason=bad fan")
        job = int(cli(c, "ranch.cli.rbatch", "--parsable", "-N", "4", "-t", "30", "-o",
                      "/dev/null", "--wrap", "sleep 60").split(";")[0])
        c.wait_for(lambda: json.loads(cli(c, "ranch.cli.rqueue", "--why", str(job), "--json"))
                   ["reason"] not in ("None", ""), what="a pass over the job")
        said = json.loads(cli(c, "ranch.cli.rqueue", "--why", str(job), "--json"))
        got = _why(c, job, TOKEN)  # alice: an admin
        assert got.status_code == 200, got.text
        doc = got.json()["why"]
        assert doc["binding"] == said["binding"] and "n4" in " ".join(doc["evidence"])
        assert doc["binding"].startswith(doc["reason"] + ": needs 4 node(s)"), doc
        assert _why(c, job, OTHER_TOKEN).status_code == 404  # bob: not his job
        assert _why(c, job, None).status_code in (401, 404)  # no token: no job is anyone's
        if CHROMIUM is None:
            pytest.skip("no chromium on PATH: the page itself is not looked at")
        with Browser(CHROMIUM, height=900) as b:
            b.open(c.http + "/")  # type: ignore[attr-defined]
            b.wait_js("document.querySelectorAll('#grid .c').length === 4", what="the grid")
            _sign_in(b, TOKEN)
            b.js(f"location.hash = '#job/{job}'")
            b.wait_js("!document.getElementById('jd-why').hidden", what="the Why block")
            text = b.js("document.getElementById('jd-why').innerText")
            assert "Why not running" in text.title() or "WHY NOT RUNNING" in text
            assert doc["binding"] in text and "bad fan" in text, text
            items = b.js("[...document.querySelectorAll('#jd-why-list li')]"
                         ".map(x => x.textContent)")
            assert any(i.startswith("Sooner: --nodes=") for i in items), items
            where = os.environ.get("RANCH_SCREENSHOTS") or str(tmp_path)
            os.makedirs(where, exist_ok=True)
            b.screenshot(os.path.join(where, "job-why.png"))
