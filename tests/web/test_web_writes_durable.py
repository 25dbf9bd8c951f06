"""A write made through the HTTP layer answers as rcontrol's and rbatch's do: once what it
confirms is on disk, and with an error, not a success, when the journal cannot take it (the
daemon hands its Durability to the web layer; ctld/web/app.py Web.not_on_disk and submit)."""

from __future__ import annotations

import httpx
import trio

from ranch.conf.model import HttpSettings
from ranch.ctld.daemon import Daemon, web_ports
from ranch.ctld.web.app import build_app
from ranch.protocol import durable
from tests.ctld.helpers import job, make_config

KEY = b"k" * 32
TOKEN = "a-token-for-alice-0123456789abcdef"


async def test_web_writes_answer_once_on_disk_and_fail_when_not(tmp_path, monkeypatch) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice:{TOKEN}\n")
    tokens.chmod(0o600)
    d = Daemon(make_config(extra="AdminUsers=alice"), KEY, state_dir=str(tmp_path / "state"),
               host="127.0.0.1", port=0, save_in_thread=False)
    (tmp_path / "state").mkdir(exist_ok=True)
    settings = HttpSettings(listen="127.0.0.1:1", token_file=str(tokens), auth="token")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with trio.open_nursery() as nursery:
        await nursery.start(d.run)
        app = build_app(*web_ports(d.controller), settings, d.durability)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://rctld") as client:
            before = d.store.writes
            r = await client.post("/api/v1/nodes/n1/state", headers=auth,
                                  json={"state": "DRAIN", "reason": "disk"})
            assert r.status_code == 200, r.text
            assert d.store.writes > before  # answered after a journal write, not before

            def full(fd: int, data: bytes) -> None:
                raise OSError(28, "No space left on device")

            monkeypatch.setattr(durable, "write_all_fsync", full)
            r = await client.post("/api/v1/nodes/n2/state", headers=auth,
                                  json={"state": "DRAIN", "reason": "disk"})
            assert r.status_code == 500 and "not yet on disk" in r.text, r.text
            # a submission the journal cannot take is refused and retracted, as rbatch's is
            web = app.state.web
            reply = await web.submit(job(nodelist="n3"))
            assert "No space left" in getattr(reply, "message", ""), reply
            assert not any(j.nodes == "n3" for j in d.cluster.jobs.jobs.values())
        nursery.cancel_scope.cancel()
