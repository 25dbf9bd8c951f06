"""A state file gone missing under the real rctld (issue 46): each one the other files prove
existed (a journal segment, older or newest; the snapshot; the node credentials; the id mark) is
refused in one line naming it, exit 1, nothing changed; -i starts without it, loudly, ids never
go back, and the next start needs no -i; a newest segment of garbage is damage, not a tear."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest

from ranch.ctld.state import journalfile, statefile

from . import test_damaged_state as damaged
from .cluster import REPO, Cluster
from .test_damaged_state import ACKED, _argv, _copy, _listed_ids, _segment, _serve, _submit

saved = damaged.saved  # its fixture: a state directory left by a SIGKILLed rctld


def _files(d: Path) -> dict[str, bytes]:
    """Every file of the state directory but the lock (each rctld writes its pid there)."""
    return {str(p): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and p.name != "rctld.lock"}


def _refusal(saved: Cluster, state: Path) -> str:
    """rctld refuses `state`: exit 1, one line (its last on stderr), no traceback, no file
    changed; the line."""
    before = _files(state)
    done = subprocess.run(_argv(saved, state, saved.port), cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=saved._env())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert _files(state) == before
    return done.stderr.splitlines()[-1]


def _split_newest(state: Path) -> tuple[Path, Path]:
    """The newest segment as a restart leaves it: its first two records in one segment, the rest
    in the next, which the id mark names (as a start's first write does)."""
    seg = _segment(state)
    lines = seg.read_bytes().splitlines(keepends=True)
    assert len(lines) >= 3, lines
    n = int(seg.name.split(".")[1])
    newer = state / f"journal.{n + 1}.jsonl"
    seg.write_bytes(b"".join(lines[:2]))
    newer.write_bytes(b"".join(lines[2:]))
    mark, _started = statefile.load_mark(str(state)) or (1, None)
    statefile.save_next_id(str(state), mark, (n + 1, orjson.loads(lines[2])["seq"]))
    return seg, newer


@pytest.mark.parametrize("gone", ["older segment", "newest segment", "newest emptied",
                                  "node_state.json", "node_credentials.json", "job_id_next"])
def test_a_file_the_others_prove_existed_is_refused_in_one_line(saved, tmp_path, gone) -> None:
    state = _copy(saved, tmp_path)
    if gone == "older segment":
        path, newer = _split_newest(state)
        path.unlink()
        said = f"are missing: {state / 'node_state.json'} holds records up to"
        named = newer
    elif gone.startswith("newest"):
        path = named = _segment(state)
        path.unlink() if gone == "newest segment" else path.write_bytes(b"")
        said = f"{path} is missing or lost its records: the id mark says it was started with"
    else:
        path = named = state / gone
        path.unlink()
        said = {"node_state.json": "(the snapshot) is missing: the journal starts at record",
                "node_credentials.json": "is missing, though the snapshot says nodes hold "
                                         "credentials (n1)",
                "job_id_next": "(the job id mark) is missing, though the snapshot holds jobs",
                }[gone]
    line = _refusal(saved, state)
    head = "journal records" if gone == "older segment" else str(named)
    assert line.startswith(f"rctld: missing state: {head}"), line
    assert said in line and str(named) in line, line
    assert line.endswith("restore it from a backup, or start rctld with -i "
                         "(--ignore-damaged-state) to start without it")


def test_a_newest_segment_of_garbage_without_a_newline_is_damage(saved, tmp_path) -> None:
    state = _copy(saved, tmp_path)
    path = _segment(state)
    path.write_bytes(os.urandom(300).replace(b"\n", b"."))  # no record left to have been torn
    line = _refusal(saved, state)
    assert line.startswith(f"rctld: damaged state: {path} at byte 0: journal record"), line


def test_ignore_damaged_starts_without_the_newest_segment_loudly_and_once(saved, tmp_path) -> None:
    state = _copy(saved, tmp_path)
    _segment(state).unlink()  # jobs 5-8 were only there
    c = _serve(saved, state, "-i")
    try:
        log = c.log("rctld")
        assert "MISSING STATE IGNORED (-i): starting without it" in log
        assert "ERROR" in next(x for x in log.splitlines() if "MISSING STATE IGNORED" in x)
        assert set(range(1, 5)) <= _listed_ids(c)  # the snapshot's jobs, and its drain
        assert c.snapshot()["n1"]["state"]["reason"]["text"] == "kept"
        new = _submit(c, 9)
        assert new > ACKED + 1000  # past every id seen, and a margin: 5-8 never come back
    finally:
        c.stop()
    c = _serve(saved, state)  # the -i start wrote a snapshot: the state is whole again
    try:
        assert new in _listed_ids(c) and _submit(c, 10) > new
    finally:
        c.stop()


def test_a_real_torn_last_record_after_a_restart_still_recovers(saved, tmp_path) -> None:
    state = _copy(saved, tmp_path)
    _seg, newer = _split_newest(state)
    whole = newer.read_bytes()
    newer.write_bytes(whole + journalfile.encode({"seq": 10**6, "job": {"id": 99}})[:40])
    c = _serve(saved, state)
    try:
        assert set(range(1, ACKED + 1)) <= _listed_ids(c)
        assert "torn last record dropped" in c.log("rctld")
    finally:
        c.stop()
