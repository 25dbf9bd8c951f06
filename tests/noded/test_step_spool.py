"""A step's output spool (noded/stepspool.py): what rnoded read is kept by offset across files,
read again from the count rrun says it took, let go a file at a time as rrun acknowledges, and
found whole by the next rnoded (a new Spool over the same directory)."""

from __future__ import annotations

from pathlib import Path

import trio

from ranch.noded import stepspool
from ranch.noded.stepspool import Spool, StepOutput


def test_a_restarted_rnoded_reads_on_from_rrun_s_count(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(stepspool, "SEGMENT", 10)  # small files, to cross their bounds
    first = Spool(tmp_path, 0, 1)
    data = bytes(range(48, 48 + 35))
    for i in range(0, len(data), 7):
        first.append(data[i:i + 7])
    assert first.end == 35
    first.close()
    again = Spool(tmp_path, 0, 1)  # the next rnoded's
    assert again.end == 35 and again.acked == 0
    assert b"".join(again.read(0)) == data
    assert b"".join(again.read(12)) == data[12:]
    assert b"".join(again.read(35)) == b""
    again.append(b"more")  # what it reads from the pipe follows
    assert b"".join(again.read(30)) == data[30:] + b"more"
    again.close()


def test_acknowledged_files_go_but_never_the_one_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(stepspool, "SEGMENT", 10)
    spool = Spool(tmp_path, 3, 2)
    for _ in range(5):
        spool.append(b"x" * 10)
    assert len(list(tmp_path.iterdir())) == 5
    spool.trim(25)  # files from 0 and 10 wholly acknowledged; 20 not
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.3.2.20", "out.3.2.30",
                                                          "out.3.2.40"]
    assert b"".join(spool.read(25)) == b"x" * 25
    spool.trim(50)
    assert [p.name for p in tmp_path.iterdir()] == ["out.3.2.40"]
    assert Spool(tmp_path, 3, 2).acked == 40  # the next rnoded knows where its files start
    spool.close()


def test_rrun_s_word_lets_resends_and_a_stream_too_far_ahead_go_on(tmp_path: Path,
                                                                   monkeypatch) -> None:
    monkeypatch.setattr(stepspool, "LIMIT", 8)

    async def main() -> None:
        out = StepOutput(tmp_path, [(0, 1), (0, 2)], resuming=True)
        spool = out.spools[(0, 1)]
        assert not spool.resent.is_set() and not out.answered.is_set()
        spool.append(b"0123456789")
        waited = []

        async def room() -> None:
            await out.room(spool, lambda: True)
            waited.append(True)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(room)
            await trio.sleep(0.05)
            assert not waited  # 10 bytes ahead of rrun's word, LIMIT 8
            out.took(((0, 1, 4),))
        assert waited and out.answered.is_set() and spool.acked == 4
        assert b"".join(out.missed(spool)) == b"456789"
        assert b"".join(out.missed(out.spools[(0, 2)])) == b""
        out.close()

    trio.run(main)
