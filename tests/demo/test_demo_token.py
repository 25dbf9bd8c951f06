"""`make demo`'s web token is an admin's: the README's curl POST and the page's Drain/Resume
buttons change nodes with it (a real rctld runs the demo's own config)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import httpx

from tests.integration.cluster import REPO, Cluster


def _demo_module():
    spec = importlib.util.spec_from_file_location("ranch_demo", REPO / "examples" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_token_may_drain_and_resume(tmp_path: Path) -> None:
    demo = _demo_module().Demo(tmp_path / "demo", None)
    demo.dir.mkdir()
    conf = demo.write_config()
    with Cluster(tmp_path / "ctl", ["gpu01"], conf_text=conf.read_text()) as c:
        for script in demo.dir.glob("*.sh"):  # its programs, named relative to the config
            shutil.copy2(script, c.dir / script.name)
        c.start_ctld()
        url = f"http://127.0.0.1:{demo.http_port}/api/v1/nodes/gpu01/state"
        auth = {"Authorization": f"Bearer {demo.token}"}
        r = httpx.post(url, json={"state": "DRAIN", "reason": "demo"}, headers=auth, timeout=10)
        assert r.status_code == 200, r.text
        assert r.json()["changed"] == ["gpu01"] and r.json()["user"] == "demo"
        r = httpx.post(url, json={"state": "RESUME"}, headers=auth, timeout=10)
        assert r.status_code == 200, r.text
