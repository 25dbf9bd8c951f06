"""What the state files prove about each other at start (ctld/state/continuity.py, issue 46):
each file the others prove existed, gone or emptied, is refused in one line naming it, nothing
changed; -i starts without it, loudly, and the next start finds the state whole; a fresh
directory starts; only a real torn last record is dropped."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from ranch.ctld.state import continuity, integrity, journalfile, statefile
from ranch.ctld.state.continuity import MissingState
from ranch.ctld.state.integrity import DamagedState
from ranch.ctld.state.store import FileStore


def _jobs(ids) -> list[dict]:
    return [{"job": {"id": i}} for i in ids]


def _ids(records) -> list[int]:
    return [r["job"]["id"] for r in records if "job" in r]


async def _saved(tmp_path: Path) -> Path:
    """A state directory as a killed rctld leaves it: a snapshot holding jobs 1-2 (records 1-2,
    its segment trimmed), then records 3-4 (jobs 3, 4) in journal.2.jsonl, written before a
    restart, and records 5-6 (jobs 5, 6) in journal.3.jsonl, after it; n1 holds a credential."""
    tmp_path.mkdir(exist_ok=True)
    s = FileStore(str(tmp_path), in_thread=False)
    s.load()
    await s.commit(_jobs([1, 2]))
    doc = {"journal_seq": s.seq, "nodes": {}, "node_credentials": ["n1"],
           "jobs": {"next_id": 3, "jobs": [{"id": 1}, {"id": 2}]}}
    await s.snapshot(doc, s.rotate())
    (tmp_path / continuity.CREDENTIALS_FILE).write_bytes(b"kept by ctld/rpc/nodecredentials.py")
    await s.commit(_jobs([3, 4]))
    s.close()
    s = FileStore(str(tmp_path), in_thread=False)  # a restart: a new segment
    s.load()
    await s.commit(_jobs([5, 6]))
    s.close()
    assert sorted(p.name for p in tmp_path.glob("journal.*")) == [
        "journal.2.jsonl", "journal.3.jsonl"]
    return tmp_path


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def _refused(d: Path, path: Path, what: str) -> None:
    """load refuses `d` naming `path`, in one line; no file is changed."""
    before = _files(d)
    with pytest.raises(MissingState) as err:
        FileStore(str(d)).load()
    assert err.value.path == str(path)
    line = str(err.value)
    assert "\n" not in line and what in line, line
    assert line.startswith("missing state: ") and "-i (--ignore-damaged-state)" in line
    assert _files(d) == before


async def test_the_whole_directory_loads_and_a_fresh_one_starts(tmp_path) -> None:
    d = await _saved(tmp_path / "state")
    doc, records = FileStore(str(d)).load()
    assert [j["id"] for j in doc["jobs"]["jobs"]] == [1, 2]
    assert _ids(records) == [3, 4, 5, 6]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert FileStore(str(fresh)).load() == (None, [])


@pytest.mark.parametrize("how", ["deleted", "emptied"])
async def test_an_older_segment_gone_is_refused(tmp_path, how) -> None:
    d = await _saved(tmp_path)
    seg = d / "journal.2.jsonl"
    seg.unlink() if how == "deleted" else seg.write_bytes(b"")
    _refused(d, d / "journal.3.jsonl",
             f"journal records 3-4 are missing: {d / statefile.STATE_FILE} holds records up to 2 "
             f"and the journal resumes at 5 in {d / 'journal.3.jsonl'}")


async def test_records_missing_between_two_segments_name_both(tmp_path) -> None:
    d = await _saved(tmp_path)
    seg = d / "journal.2.jsonl"
    seg.write_bytes(seg.read_bytes().split(b"\n")[0] + b"\n")  # record 4 lost whole
    _refused(d, d / "journal.3.jsonl",
             f"journal record 4 is missing: the journal jumps from {seg} to "
             f"{d / 'journal.3.jsonl'}")


@pytest.mark.parametrize("how", ["deleted", "emptied", "garbage"])
async def test_the_newest_segment_gone_or_garbage_is_refused(tmp_path, how) -> None:
    d = await _saved(tmp_path)
    seg = d / "journal.3.jsonl"
    if how == "deleted":
        seg.unlink()
    elif how == "emptied":
        seg.write_bytes(b"")
    else:  # garbage with no newline: no torn tail, since no record is left that was appended
        seg.write_bytes(os.urandom(64).replace(b"\n", b"x"))
        before = _files(d)
        with pytest.raises(DamagedState) as err:
            FileStore(str(d)).load()
        assert (err.value.path, err.value.offset) == (str(seg), 0)
        assert _files(d) == before
        return
    _refused(d, seg, f"{seg} is missing or lost its records: the id mark says it was started "
             f"with record 5, and the journal ends at record 4 in {d / 'journal.2.jsonl'}")


async def test_the_snapshot_gone_is_refused(tmp_path) -> None:
    d = await _saved(tmp_path)
    (d / statefile.STATE_FILE).unlink()
    _refused(d, d / statefile.STATE_FILE, f"{d / statefile.STATE_FILE} (the snapshot) is "
             f"missing: the journal starts at record 3 in {d / 'journal.2.jsonl'}, so a snapshot "
             "held records 1-2")


async def test_a_snapshot_older_than_the_journal_is_refused(tmp_path) -> None:
    d = await _saved(tmp_path / "state")
    older = FileStore(str(tmp_path / "older"))
    (tmp_path / "older").mkdir()
    older.save({"journal_seq": 1, "nodes": {}, "jobs": {"next_id": 2, "jobs": [{"id": 1}]}})
    os.replace(tmp_path / "older" / statefile.STATE_FILE, d / statefile.STATE_FILE)
    _refused(d, d / "journal.2.jsonl", f"journal record 2 is missing: {d / statefile.STATE_FILE}"
             " holds records up to 1 and the journal resumes at 3")


async def test_the_id_mark_gone_is_refused(tmp_path) -> None:
    d = await _saved(tmp_path)
    (d / statefile.NEXT_ID_FILE).unlink()
    _refused(d, d / statefile.NEXT_ID_FILE, "(the job id mark) is missing, though the "
             "snapshot holds jobs")


async def test_the_credentials_gone_are_refused(tmp_path) -> None:
    d = await _saved(tmp_path)
    path = d / continuity.CREDENTIALS_FILE
    path.unlink()
    _refused(d, path, "is missing, though the snapshot says nodes hold credentials (n1)")


def test_the_credentials_file_name_is_the_one_rctld_writes() -> None:
    from ranch.ctld.rpc import nodecredentials

    assert continuity.CREDENTIALS_FILE == nodecredentials.FILE


@pytest.mark.parametrize("gone", ["journal.2.jsonl", "journal.3.jsonl", statefile.STATE_FILE,
                                  statefile.NEXT_ID_FILE, continuity.CREDENTIALS_FILE])
async def test_ignore_damaged_starts_without_it_loudly_and_the_next_start_is_whole(
        tmp_path, caplog, gone) -> None:
    d = await _saved(tmp_path)
    (d / gone).unlink()
    kept = {"journal.2.jsonl": [1, 2, 5, 6], "journal.3.jsonl": [1, 2, 3, 4],
            statefile.STATE_FILE: [3, 4, 5, 6]}.get(gone, [1, 2, 3, 4, 5, 6])
    s = FileStore(str(d), ignore_damaged=True, in_thread=False)
    with caplog.at_level(logging.WARNING):
        doc, records = s.load()
    [missing] = s.ignored
    named = {"journal.2.jsonl": "journal records 3-4 are missing"}.get(gone, gone)
    assert named in missing, missing
    assert [r.levelno for r in caplog.records if "MISSING STATE IGNORED" in r.getMessage()] \
        == [logging.ERROR]
    have = [j["id"] for j in (doc or {}).get("jobs", {}).get("jobs", [])] + _ids(records)
    assert have == kept  # every record still there is taken
    assert doc["jobs"]["next_id"] > 6 + integrity.MARGIN  # past every id seen, and a margin
    # rctld writes a snapshot at once (ctld/daemon.py): then a start without -i finds it whole
    s.save({"journal_seq": s.seq, "nodes": {}, "jobs": doc["jobs"], "node_credentials": []})
    await s.commit(_jobs([doc["jobs"]["next_id"]]))
    s.close()
    again = FileStore(str(d))
    assert _ids(again.load()[1])[-1] == doc["jobs"]["next_id"] and not again.ignored


async def test_a_real_torn_last_record_still_recovers(tmp_path) -> None:
    d = await _saved(tmp_path)
    seg = d / "journal.3.jsonl"
    whole = seg.read_bytes()
    seg.write_bytes(whole + journalfile.encode({"seq": 7, "job": {"id": 7}})[:25])
    assert _ids(FileStore(str(d)).load()[1]) == [3, 4, 5, 6]
    assert seg.read_bytes() == whole  # cut back to its whole records


async def test_garbage_after_the_last_record_is_damage_not_a_tear(tmp_path) -> None:
    d = await _saved(tmp_path)
    seg = d / "journal.3.jsonl"
    whole = seg.read_bytes()
    seg.write_bytes(whole + b"\x00" * 40)
    with pytest.raises(DamagedState) as err:
        FileStore(str(d)).load()
    assert (err.value.path, err.value.offset) == (str(seg), len(whole))


async def test_a_torn_first_record_is_a_tear_only_before_the_mark_names_the_segment(
        tmp_path) -> None:
    d = await _saved(tmp_path)
    seg = d / "journal.3.jsonl"
    torn = journalfile.encode({"seq": 5, "job": {"id": 5}})[:25]
    seg.write_bytes(torn)  # the mark names journal.3 from record 5: that record was whole
    with pytest.raises(DamagedState) as err:
        FileStore(str(d)).load()
    assert (err.value.path, err.value.offset) == (str(seg), 0)
    # a crash in the first write to a new segment, before the mark named it: never acknowledged
    (d / "journal.4.jsonl").write_bytes(journalfile.encode({"seq": 7, "job": {"id": 7}})[:25])
    seg.unlink()
    (d / "journal.2.jsonl").rename(seg)  # (records 3-4 as the mark's segment, not the newest)
    statefile.save_next_id(str(d), 300, (3, 3))
    assert _ids(FileStore(str(d)).load()[1]) == [3, 4]
    assert (d / "journal.4.jsonl").read_bytes() == b""


def test_records_a_later_void_names_are_not_replayed() -> None:
    """A write reported failed but partly stored (an etcd flush of several transactions whose
    second failed) is voided by the next write: its records are not replayed, so a submission
    its client was told failed never runs; records after the void, and the void, stay."""
    recs = [{"seq": 1, "job": {"id": 1}}, {"seq": 2, "job": {"id": 2}},
            {"seq": 3, "job": {"id": 3}}, {"seq": 4, "void_from": 2},
            {"seq": 5, "job": {"id": 5}}, {"job": {"id": 0}}]
    kept = continuity.without_voided(recs)
    assert [r.get("seq") for r in kept] == [1, 4, 5, None]
    assert continuity.without_voided(recs[:3]) == recs[:3]  # no void: untouched
