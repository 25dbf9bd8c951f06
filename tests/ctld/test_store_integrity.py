"""The journal's reading rules (ctld/state/journalfile.py, ctld/state/store.py): which damage is
a torn tail to drop and which stops rctld, for this release's sealed segments and the last
release's."""

from __future__ import annotations

import orjson
import pytest

from ranch.ctld.state import integrity, journalfile, statefile
from ranch.ctld.state.integrity import DamagedState
from ranch.ctld.state.store import ID_BLOCK, FileStore


def _records(ids) -> bytes:
    return b"".join(journalfile.encode({"seq": i, "job": {"id": i}}) for i in ids)


def _legacy(ids) -> bytes:
    return b"".join(orjson.dumps({"seq": i, "job": {"id": i}}) + b"\n" for i in ids)


def _ids(store: FileStore) -> list[int]:
    return [r["job"]["id"] for r in store.read()]


def test_a_torn_tail_of_the_newest_segment_is_cut_off(tmp_path) -> None:
    (tmp_path / "journal.1.jsonl").write_bytes(_records([1, 2]))
    whole = _records([3, 4])
    (tmp_path / "journal.2.jsonl").write_bytes(whole + _records([5])[:30])
    assert _ids(FileStore(str(tmp_path))) == [1, 2, 3, 4]
    assert (tmp_path / "journal.2.jsonl").read_bytes() == whole


def test_a_torn_tail_of_an_older_sealed_segment_is_refused(tmp_path) -> None:
    torn = _records([1, 2])
    (tmp_path / "journal.1.jsonl").write_bytes(torn + _records([3])[:30])
    (tmp_path / "journal.2.jsonl").write_bytes(_records([4]))
    with pytest.raises(DamagedState) as err:
        FileStore(str(tmp_path)).read()
    assert (err.value.path, err.value.offset) == (str(tmp_path / "journal.1.jsonl"), len(torn))


def test_the_last_releases_segments_keep_dropping_their_torn_tails(tmp_path) -> None:
    (tmp_path / "journal.1.jsonl").write_bytes(_legacy([1, 2]) + b'{"seq":3,"jo')
    (tmp_path / "journal.2.jsonl").write_bytes(_legacy([4]))
    assert _ids(FileStore(str(tmp_path))) == [1, 2, 4]


def test_a_whole_last_record_that_fails_its_checksum_is_damage_not_a_tear(tmp_path) -> None:
    data = bytearray(_records([1, 2]))
    data[-5] ^= 1  # inside the last record, its newline intact
    (tmp_path / "journal.1.jsonl").write_bytes(bytes(data))
    with pytest.raises(DamagedState, match="checksum mismatch"):
        FileStore(str(tmp_path)).read()


def test_ignore_damaged_keeps_every_record_that_checks_out(tmp_path) -> None:
    data = _records([1]) + b"\x00garbage\n" + _records([2, 3])
    (tmp_path / "journal.1.jsonl").write_bytes(data)
    store = FileStore(str(tmp_path), ignore_damaged=True)
    doc, records = store.load()
    assert [r["job"]["id"] for r in records] == [1, 2, 3]
    [aside] = tmp_path.glob("journal.1.jsonl.damaged-*")
    assert aside.read_bytes() == data
    assert doc["jobs"]["next_id"] >= 3 + 1 + integrity.MARGIN


def test_the_next_id_survives_a_lost_state_file(tmp_path) -> None:
    FileStore(str(tmp_path)).save({"nodes": {}, "jobs": {"next_id": 42, "jobs": []}})
    (tmp_path / statefile.STATE_FILE).unlink()
    doc, _ = FileStore(str(tmp_path)).load()
    assert doc["jobs"]["next_id"] == 42


def _job_records(ids) -> list[dict]:
    return [{"job": {"id": i}} for i in ids]


async def test_the_id_mark_is_on_disk_with_the_write_that_first_journals_an_id_past_it(
        tmp_path) -> None:
    store = FileStore(str(tmp_path), in_thread=False)
    store.load()
    await store.commit(_job_records([1, 2]))
    mark = statefile.load_next_id(str(tmp_path))
    assert mark == 3 + ID_BLOCK  # reserved in the same write, before any reply
    writes = store.writes
    await store.commit(_job_records(range(3, mark)))  # inside the block: no new mark
    assert statefile.load_next_id(str(tmp_path)) == mark and store.writes == writes + 1
    await store.commit(_job_records([mark]))  # the first id past it reserves the next block
    assert statefile.load_next_id(str(tmp_path)) == mark + 1 + ID_BLOCK
    # a snapshot does not bring the mark down; a clean stop's save does, to the true next id
    await store.snapshot({"nodes": {}, "jobs": {"next_id": mark + 1, "jobs": []}})
    assert statefile.load_next_id(str(tmp_path)) == mark + 1 + ID_BLOCK
    store.save({"nodes": {}, "jobs": {"next_id": mark + 1, "jobs": []}})
    assert statefile.load_next_id(str(tmp_path)) == mark + 1
    await store.commit(_job_records([mark + 1]))  # and the next id given reserves again
    assert statefile.load_next_id(str(tmp_path)) == mark + 2 + ID_BLOCK


async def test_a_journal_cut_at_a_record_boundary_never_gives_an_id_again(tmp_path) -> None:
    store = FileStore(str(tmp_path), in_thread=False)
    store.load()
    await store.commit(_job_records([1, 2, 3]))
    segment = tmp_path / "journal.1.jsonl"
    segment.write_bytes(segment.read_bytes().split(b"\n", 1)[0] + b"\n")  # jobs 2, 3 lost
    doc, records = FileStore(str(tmp_path)).load()
    assert [r["job"]["id"] for r in records] == [1]
    assert doc["jobs"]["next_id"] > 3


def test_a_sealed_state_file_round_trips_and_an_unsealed_one_of_format_1_loads(tmp_path) -> None:
    statefile.save(str(tmp_path), {"nodes": {"a": 1}})
    assert statefile.load(str(tmp_path)) == {"format": 2, "nodes": {"a": 1}}
    (tmp_path / statefile.STATE_FILE).write_bytes(b'{"format":1,"nodes":{"b":2}}')
    assert statefile.load(str(tmp_path))["nodes"] == {"b": 2}
    (tmp_path / statefile.STATE_FILE).write_bytes(b'{"format":2,"nodes":{"b":2}}')
    with pytest.raises(statefile.StateFileError, match="format 2 without its checksum"):
        statefile.load(str(tmp_path))  # format 2 is always sealed: an unsealed one is forged


def test_the_state_file_is_written_in_pieces_byte_for_byte_as_sealed(tmp_path) -> None:
    # statefile.save writes the checksum and the body as two pieces (no copy of a large body):
    # the file must be exactly what the one-piece seal wrote before, and check out
    doc = {"nodes": {f"n{i}": {"state": {"base": "IDLE"}} for i in range(50)}, "jobs": {}}
    statefile.save(str(tmp_path), doc)
    raw = (tmp_path / statefile.STATE_FILE).read_bytes()
    assert raw == integrity.seal(orjson.dumps({"format": statefile.FORMAT_VERSION, **doc}))
    assert integrity.check(raw) == (True, None)
