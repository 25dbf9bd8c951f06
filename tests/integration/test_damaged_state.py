"""A damaged state directory under the real rctld (issue 30): every damaged file is refused in one
line naming the file and byte offset, with exit 1 and the file untouched; a torn last journal
record is dropped without losing an acknowledged one; -i moves the damaged file aside and job ids
never go back; a garbled pack fails its one job, never the node; yesterday's unsealed files load;
one rctld per state directory (issue 32)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ranch.ctld.jobs import history
from ranch.ctld.jobs.history import FileHistory
from ranch.ctld.nodes import eventlog
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.state.integrity import DamagedState
from ranch.protocol import messages as m

from .cluster import REPO, Cluster, wait_for

ACKED = 8  # jobs acknowledged in the saved directory: 1-4 in a snapshot and a pack, 5-8 journal


def _submit(c: Cluster, i: int) -> int:
    reply = c.request(m.SubmitJob(
        script=f"#!/bin/sh\necho job{i}\n", user="root", uid=os.getuid(), gid=os.getgid(),
        workdir=str(c.dir), env=(("PATH", os.environ.get("PATH", "")),), nodelist="n2"),
        timeout=10)
    assert isinstance(reply, m.SubmitReply), reply
    return reply.job_id


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Cluster:
    """A state directory left by a SIGKILLed rctld: a snapshot, a pack, journal records after
    them, node credentials, a drain; jobs wait for n2, which never came. (Snapshots are 5 s
    apart: jobs 5-8 are submitted at once after one, so they are in the journal only.)"""
    c = Cluster(tmp_path_factory.mktemp("saved"), nodes=["n1", "n2"])
    try:
        c.start_ctld()
        c.start_node("n1")
        c.wait_for(lambda: c.state("n1") == "IDLE", 30, what="n1 idle")
        ids = [_submit(c, i) for i in range(1, 5)]
        state = Path(c.state_dir)
        wait_for(lambda: list((state / "jobs").glob("bulk.*")), 30, what="a pack")
        reply = c.request(m.UpdateNodes("n1", "DRAIN", "kept", "root"))
        assert reply.ok, reply
        # the next snapshot holds where each job's bulk is in the pack (and the drain)
        wait_for(lambda: b'"bulk_at":[' in (state / "node_state.json").read_bytes(), 30,
                 what="a snapshot pointing into the pack")
        ids += [_submit(c, i) for i in range(5, 9)]
        assert ids == list(range(1, ACKED + 1))
        c.kill_node("n1")
        c.kill_ctld()
    except BaseException:
        c.stop()  # no daemon outlives a fixture that failed
        raise
    assert (state / "node_credentials.json").exists()
    return c


def _copy(saved: Cluster, tmp_path: Path) -> Path:
    d = tmp_path / "state"
    shutil.copytree(saved.state_dir, d)
    (d / "rctld.lock").unlink(missing_ok=True)
    return d


def _argv(saved: Cluster, state: Path, port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ranch.ctld", "-f", str(saved.conf_path), "--listen",
            f"127.0.0.1:{port}", "--state-dir", str(state), "--key-file", saved.key_file, *extra]


def _refused(saved: Cluster, state: Path, path: Path, offset: int, what: str) -> None:
    """rctld refuses the directory: exit 1, one line naming the file and offset, last on stderr;
    no traceback; the damaged file is byte for byte what it was."""
    before = path.read_bytes()
    done = subprocess.run(_argv(saved, state, saved.port), cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=saved._env())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == f"rctld: {DamagedState(str(path), offset, what)}"
    assert path.read_bytes() == before


def _segment(state: Path) -> Path:
    return max(state.glob("journal.*.jsonl"), key=lambda p: int(p.name.split(".")[1]))


def _line_offsets(data: bytes) -> list[int]:
    return [0] + [i + 1 for i, b in enumerate(data[:-1]) if b == 0x0A]


@pytest.mark.parametrize("how", ["cut", "emptied", "garbage", "random"])
def test_a_damaged_snapshot_is_refused_in_one_line(saved, tmp_path, how) -> None:
    state = _copy(saved, tmp_path)
    path = state / "node_state.json"
    data = path.read_bytes()
    damaged, what = {
        "cut": (data[: len(data) // 2], "checksum mismatch"),
        "emptied": (b"", "not valid JSON (Input is a zero-length, empty document)"),
        "garbage": (b"garbage\n", "not valid JSON (unexpected character, expected a JSON value)"),
        "random": (data[:200] + os.urandom(16) + data[216:], "checksum mismatch"),
    }[how]
    path.write_bytes(damaged)
    _refused(saved, state, path, 0, what)


@pytest.mark.parametrize("how", ["random", "garbage"])
def test_damage_in_the_middle_of_a_journal_segment_is_refused_at_its_offset(
        saved, tmp_path, how) -> None:
    state = _copy(saved, tmp_path)
    path = _segment(state)
    data = path.read_bytes()
    starts = _line_offsets(data)
    assert len(starts) >= 3, data
    at = starts[1]  # the second record: records follow it, so it is not a torn tail
    if how == "random":
        data = data[: at + 30] + os.urandom(8).replace(b"\n", b"x") + data[at + 38:]
        what = "journal record checksum mismatch"
    else:
        data = data[:at] + b"garbage\n" + data[at:]
        what = "journal record not a JSON record"
    path.write_bytes(data)
    _refused(saved, state, path, at, what)


@pytest.mark.parametrize("which", ["events", "history"])
def test_damage_in_the_event_log_or_the_job_history_is_refused_and_i_sets_it_aside(
        saved, tmp_path, which) -> None:
    state = _copy(saved, tmp_path)
    if which == "events":
        log = EventLog(max_events=100, max_age=10**10)
        for i in range(4):
            log.add("state", f"x{i}")
        eventlog.flush(log, str(state))
        path, what = state / eventlog.FILE_NAME, "event log record checksum mismatch"
    else:
        h = FileHistory(str(state / history.DIR_NAME))
        for i in (101, 102, 103):
            h.ended({"job_id": i, "restarts": 0, "state": "COMPLETED", "end_time": 1.8e9})
        h.write(h.take())
        path, what = Path(h.path(h.days()[0])), "job history record checksum mismatch"
    data = path.read_bytes()
    at = _line_offsets(data)[1]
    path.write_bytes(data[: at + 30] + os.urandom(8).replace(b"\n", b"x") + data[at + 38:])
    _refused(saved, state, path, at, what)
    c = _serve(saved, state, "-i")
    try:
        assert [p.name for p in state.glob("**/" + path.name + ".damaged-*")]
        assert set(range(1, ACKED + 1)) <= _listed_ids(c)
    finally:
        c.stop()


def test_garbled_credentials_are_refused_in_one_line(saved, tmp_path) -> None:
    state = _copy(saved, tmp_path)
    path = state / "node_credentials.json"
    data = path.read_bytes()
    path.write_bytes(data[:20] + b"XXXX" + data[24:])
    _refused(saved, state, path, 0, "checksum mismatch")
    path.write_bytes(b"[1, 2")
    _refused(saved, state, path, 5, "not valid JSON (unexpected end of data)")


def _serve(saved: Cluster, state: Path, *extra: str) -> Cluster:
    """A cluster object on the copied directory, its rctld started with `extra`."""
    runs = len(list(state.parent.glob("run*")))
    c = Cluster(state.parent / f"run{runs}", nodes=["n1", "n2"],
                conf_text=saved.conf_path.read_text())
    c.port, c.addr, c.key_file, c.state_dir = saved.port, saved.addr, saved.key_file, str(state)
    c.conf_path = saved.conf_path
    c.start_ctld(*extra)
    return c


def test_a_torn_last_record_is_dropped_and_nothing_acknowledged_is_lost(saved, tmp_path) -> None:
    state = _copy(saved, tmp_path)
    path = _segment(state)
    whole = path.read_bytes()
    last = whole.splitlines(keepends=True)[-1]
    path.write_bytes(whole + last[: len(last) // 2])  # a crash in the middle of an append
    c = _serve(saved, state)
    try:
        assert set(range(1, ACKED + 1)) <= _listed_ids(c)
        assert c.snapshot()["n1"]["state"]["reason"]["text"] == "kept"
        # cut back to its whole records for every later start (unless a snapshot trimmed it)
        assert not path.exists() or path.read_bytes() == whole
        assert "torn last record dropped" in c.log("rctld")
        assert _submit(c, 9) > ACKED
    finally:
        c.stop()


def test_a_journal_cut_at_a_record_boundary_never_gives_an_acknowledged_id_again(
        saved, tmp_path) -> None:
    """Records lost whole off the end of the newest segment, after its first (which the id mark
    names: the whole segment gone is refused, tests/integration/test_missing_state.py), read as
    a crash before they were appended: the id mark on file (written with the commit that first
    journaled an id past it) still keeps every acknowledged id from being given again. A clean
    stop leaves no gap."""
    state = _copy(saved, tmp_path)
    path = _segment(state)
    data = path.read_bytes()
    at = data.index(b'"id":6,')  # job 6's first record: 6-8 were acknowledged from here on
    assert data.index(b'"id":5,') < at
    path.write_bytes(data[: data.rfind(b"\n", 0, at) + 1])
    c = _serve(saved, state)
    try:
        assert 5 in _listed_ids(c)
        assert not set(range(6, ACKED + 1)) & _listed_ids(c)  # lost: the journal cannot tell
        first = _submit(c, 9)
        assert first > ACKED  # no acknowledged id comes back
        assert "torn last record dropped" not in c.log("rctld")
        assert c.stop_ctld(timeout=60) == 0
        c.start_ctld()
        assert _submit(c, 10) == first + 1  # a clean restart resumes from the true last id
    finally:
        c.stop()


def _listed_ids(c: Cluster) -> set[int]:
    done = c.run_cli("ranch.cli.rqueue", "--json")
    assert done.returncode == 0, done.stderr
    return {j["job_id"] for j in orjson.loads(done.stdout)["jobs"]}


def test_ignore_damaged_state_moves_the_file_aside_and_ids_never_go_back(saved, tmp_path) -> None:
    state = _copy(saved, tmp_path)
    path = state / "node_state.json"
    damaged = path.read_bytes()[:-40]
    path.write_bytes(damaged)
    (state / "job_id_next").unlink()  # the worst case: only the damaged files know the ids
    c = _serve(saved, state, "-i")
    try:
        [aside] = state.glob("node_state.json.damaged-*")
        assert aside.read_bytes() == damaged  # kept, never overwritten
        assert set(range(5, ACKED + 1)) <= _listed_ids(c)  # the journal's records are kept
        new = _submit(c, 9)
        assert new > ACKED + 1000  # past every id seen, and a margin
    finally:
        c.stop()
    # the next start (without -i) has the new id on file: ids still go up
    c = _serve(saved, state)
    try:
        assert _submit(c, 10) > new
    finally:
        c.stop()


def test_ignore_damaged_state_keeps_what_checks_out_in_a_damaged_segment(saved, tmp_path) -> None:
    state = _copy(saved, tmp_path)
    path = _segment(state)
    data = path.read_bytes()
    at = _line_offsets(data)[1]
    path.write_bytes(data[:at] + b"garbage\n" + data[at:])
    c = _serve(saved, state, "--ignore-damaged-state")
    try:
        assert set(range(1, ACKED + 1)) <= _listed_ids(c)
        assert [p.name for p in state.glob(path.name + ".damaged-*")]
        assert not path.exists()
    finally:
        c.stop()
    c = _serve(saved, state)  # what was taken is in the snapshot written at the -i start
    try:
        assert set(range(1, ACKED + 1)) <= _listed_ids(c)
    finally:
        c.stop()


def _unseal(data: bytes) -> bytes:
    return re.sub(rb'(?m)^\{"crc":"[0-9a-f]{8}",', b"{", data)


def test_yesterdays_unsealed_state_directory_still_loads(saved, tmp_path) -> None:
    state = _copy(saved, tmp_path)
    doc = orjson.loads(_unseal((state / "node_state.json").read_bytes()))
    doc["format"] = 1
    (state / "node_state.json").write_bytes(orjson.dumps(doc))
    for seg in state.glob("journal.*.jsonl"):
        seg.write_bytes(_unseal(seg.read_bytes()))
    (state / "node_credentials.json").write_bytes(
        _unseal((state / "node_credentials.json").read_bytes()))
    (state / "job_id_next").unlink()
    c = _serve(saved, state)
    try:
        assert set(range(1, ACKED + 1)) <= _listed_ids(c)
        assert c.snapshot()["n1"]["state"]["reason"]["text"] == "kept"
        assert _submit(c, 9) == ACKED + 1
    finally:
        c.stop()


def test_a_garbled_pack_fails_its_one_job_and_the_node_still_registers(saved, tmp_path) -> None:
    state = _copy(saved, tmp_path)
    [pack] = [p for p in (state / "jobs").glob("bulk.*") if b"[2," in p.read_bytes()]
    data = pack.read_bytes()
    at = data.index(b"[2,")  # job 2's entry
    pack.write_bytes(data[:at] + b"\x00\x01garbled" + data[at + 9:])
    c = _serve(saved, state)
    try:
        c.start_node("n2")
        c.wait_for(lambda: c.state("n2") in ("IDLE", "MIXED", "ALLOCATED"), 30, what="n2 up")
        states = c.wait_for(lambda: _ended(c), 60, what="jobs 1-8 ended")
        assert states[2] == "FAILED", states
        assert all(s == "COMPLETED" for j, s in states.items() if j != 2), states
        log = c.log("rctld")
        assert "job script unreadable" in log and "registration refused" not in log
        assert "TypeError" not in log
        out = (saved.dir / "slurm-2.out").read_text()
        assert f"the batch script of job 2 cannot be read: {pack} at byte" in out, out
        assert "fails its checksum" in out, out
    finally:
        c.stop()


def _ended(c: Cluster) -> dict[int, str] | None:
    done = c.run_cli("ranch.cli.rqueue", "--json", "-t", "all")
    jobs = {j["job_id"]: j["job_state"][0] for j in orjson.loads(done.stdout)["jobs"]}
    wanted = {j: jobs.get(j) for j in range(1, ACKED + 1)}
    return wanted if all(s in ("COMPLETED", "FAILED") for s in wanted.values()) else None


def test_a_second_rctld_on_the_same_state_directory_refuses_to_start(tmp_path) -> None:
    c = Cluster(tmp_path / "lock", nodes=["n1"])
    c.start_ctld()
    first = c.ctld
    try:
        argv = [sys.executable, "-m", "ranch.ctld", "-f", str(c.conf_path), "--listen",
                f"127.0.0.1:{c.port}", "--state-dir", c.state_dir,
                "--key-file", c.key_file]
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120,
                              env=c._env())
        assert done.returncode == 1, done.stderr
        lock = os.path.join(c.state_dir, "rctld.lock")
        assert done.stderr.splitlines()[-1] == (
            f"rctld: state directory {c.state_dir} is in use by another rctld "
            f"(host={os.uname().nodename} pid={first.pid}; lock file {lock}); stop it first, "
            "or give this one another StateSaveLocation")
        assert "Traceback" not in done.stderr
        first.send_signal(signal.SIGKILL)  # its lock goes with it: no stale lock blocks
        first.wait()
        c.start_ctld()
        assert c.ctld.pid != first.pid
        assert f"pid={c.ctld.pid}" in Path(lock).read_text()
    finally:
        c.stop()
