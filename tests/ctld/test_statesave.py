"""State save: coalesced writes (a heartbeat storm does not rewrite the file), crash-safe file."""

from __future__ import annotations

import itertools

import pytest
import trio

from ranch.ctld import daemon as daemon_mod
from ranch.ctld.daemon import Daemon
from ranch.ctld.state import saving, statefile
from ranch.protocol import messages as m

from .helpers import beat, make_config, register


async def test_saves_are_coalesced_and_prompt(autojump_clock, tmp_path, monkeypatch) -> None:
    writes: list[float] = []
    real_save = statefile.save

    def counting_save(state_dir: str, doc: dict) -> None:
        writes.append(1.0)
        real_save(state_dir, doc)

    monkeypatch.setattr(daemon_mod.statefile, "save", counting_save)
    d = Daemon(make_config(), b"k" * 32, state_dir=str(tmp_path), host="127.0.0.1", port=0,
               save_in_thread=False)
    ctl = d.controller
    async with trio.open_nursery() as nursery:
        nursery.start_soon(d.saver.run)
        _, conn = register(ctl.traffic, "n1")
        # 200 heartbeats and 40 state changes over 2 s of (mock) time.
        for i in range(200):
            beat(ctl.traffic, "n1", conn, i + 1)
            if i % 5 == 0:
                request = "DRAIN" if i % 10 == 0 else "UNDRAIN"
                ctl.update_nodes(m.UpdateNodes("n1", request, f"r{i}", "alice"))
            await trio.sleep(0.01)
        await trio.sleep(saving.SAVE_INTERVAL + 0.01)  # at most one save window is lost
        nursery.cancel_scope.cancel()
    assert 2 <= len(writes) <= 2.0 / saving.SAVE_INTERVAL + 2, writes
    saved = statefile.load(str(tmp_path))
    # The last change (i=190 DRAIN, i=195 UNDRAIN) is on disk.
    assert saved["nodes"]["n1"]["state"]["flags"] == []
    assert saved["nodes"]["n1"]["hardware"]["cpus"] == 4


async def test_heartbeats_alone_do_not_write(autojump_clock, tmp_path, monkeypatch) -> None:
    writes: list[float] = []
    monkeypatch.setattr(daemon_mod.statefile, "save", lambda *a: writes.append(1))
    d = Daemon(make_config(), b"k" * 32, state_dir=str(tmp_path), host="127.0.0.1", port=0,
               save_in_thread=False)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(d.saver.run)
        _, conn = register(d.controller.traffic, "n1")
        await trio.sleep(1)
        n = len(writes)
        for i in range(100):
            beat(d.controller.traffic, "n1", conn, i + 1)
            await trio.sleep(0.05)
        assert len(writes) == n
        nursery.cancel_scope.cancel()


def test_write_atomic_replaces_whole_file(tmp_path) -> None:
    statefile.save(str(tmp_path), {"nodes": {"a": 1}})
    statefile.save(str(tmp_path), {"nodes": {"b": 2}})
    assert statefile.load(str(tmp_path))["nodes"] == {"b": 2}
    assert not list(tmp_path.glob("*.tmp")), "a temporary file was left behind"
    (tmp_path / statefile.STATE_FILE).write_text("{broken")
    with pytest.raises(statefile.StateFileError, match=statefile.STATE_FILE):
        statefile.load(str(tmp_path))


async def test_a_slow_snapshot_spaces_out_the_next_one(autojump_clock, tmp_path) -> None:
    # a snapshot that took 2 s (50,000 nodes on a loaded machine) is followed by the next one
    # no sooner than SAVE_SPACING times that, not every SAVE_INTERVAL; a quick one still waits
    # only SAVE_INTERVAL
    d = Daemon(make_config(), b"k" * 32, state_dir=str(tmp_path), host="127.0.0.1", port=0,
               save_in_thread=False)
    starts: list[float] = []
    took = [2.0, 2.0, 0.0, 0.0]

    async def timed_snapshot() -> bool:
        starts.append(trio.current_time())
        await trio.sleep(took[len(starts) - 1])
        return True

    d.saver.save_snapshot = timed_snapshot  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(d.saver.run)
        while len(starts) < 4:
            d.saver.dirty.set()  # a node changes all the time (a registration storm)
            await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps[0] >= saving.SAVE_SPACING * 2.0 > saving.SAVE_INTERVAL
    assert gaps[1] >= saving.SAVE_SPACING * 2.0
    assert saving.SAVE_INTERVAL <= gaps[2] < saving.SAVE_INTERVAL + 0.2
