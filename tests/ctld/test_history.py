"""The finished-job history's files (ctld/jobs/history.py), judged from the files: one record per
run, days pruned by age, records offered again after a restart not written twice, and a writer
SIGKILLed mid-stream loses no record it confirmed and leaves nothing a reader trips on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ranch.ctld.jobs.history import FileHistory, day_of

REPO = Path(__file__).resolve().parents[2]
DAY = 86400.0


def rec(job_id: int, end: float, restarts: int = 0, state: str = "COMPLETED") -> dict:
    return {"job_id": job_id, "restarts": restarts, "state": state, "end_time": end,
            "submit_time": end - 5, "start_time": end - 3, "array_job_id": 0}


def write(h: FileHistory, *recs: dict, verify: bool = False) -> None:
    for r in recs:
        h.ended(r, verify=verify)
    batch = h.take()
    h.write(batch)
    h.written(batch, ok=True)


def lines(h: FileHistory) -> list[str]:
    out = []
    for day in h.days():
        out += Path(h.path(day)).read_text().splitlines()
    return out


def test_records_go_to_their_end_day_and_read_back_by_window_and_id(tmp_path: Path) -> None:
    h = FileHistory(str(tmp_path / "hist"))
    now = time.time()
    write(h, rec(1, now - 3 * DAY), rec(2, now - DAY), rec(3, now))
    assert h.days() == sorted({day_of(now - 3 * DAY), day_of(now - DAY), day_of(now)})
    assert {r["job_id"] for r in h.read()} == {1, 2, 3}
    assert {r["job_id"] for r in h.read(since=now - DAY - 1)} == {2, 3}
    assert [r["job_id"] for r in h.read(ids=(1,))] == [1]
    assert [r["job_id"] for r in h.read(ids=(1,))] == [1]  # the id range cache agrees
    assert h.read(ids=(99,)) == []
    assert oct(os.stat(h.path(day_of(now))).st_mode & 0o777) == "0o600"


def test_a_run_offered_again_after_a_restart_is_not_written_twice(tmp_path: Path) -> None:
    h = FileHistory(str(tmp_path / "hist"))
    now = time.time()
    write(h, rec(7, now))
    again = FileHistory(h.dir)  # the restarted controller offers its finished jobs again
    write(again, rec(7, now), rec(8, now), verify=True)
    assert len(lines(h)) == 2
    write(again, rec(7, now, restarts=1))  # a later run of the same job is a record of its own
    assert sorted((r["job_id"], r["restarts"]) for r in again.read()) == [(7, 0), (7, 1), (8, 0)]


def test_a_job_is_held_until_its_record_is_written(tmp_path: Path) -> None:
    h = FileHistory(str(tmp_path / "hist"))
    h.ended(rec(5, time.time()))
    assert h.unwritten(5)
    batch = h.take()
    assert h.unwritten(5)  # being written is not written
    h.written(batch, ok=False)  # a failed write hands it back
    assert h.unwritten(5) and h.waiting == 1
    batch = h.take()
    h.write(batch)
    h.written(batch, ok=True)
    assert not h.unwritten(5) and h.waiting == 0


def test_a_failed_write_leaves_nothing_and_keeps_the_job(tmp_path: Path) -> None:
    blocker = tmp_path / "hist"
    blocker.write_text("a file where the directory should be")
    h = FileHistory(str(blocker))
    h.ended(rec(1, time.time()))
    batch = h.take()
    try:
        h.write(batch)
    except OSError:
        h.written(batch, ok=False)
    assert h.unwritten(1)


def test_days_older_than_purge_job_after_are_deleted_whole(tmp_path: Path) -> None:
    h = FileHistory(str(tmp_path / "hist"))
    now = time.time()
    write(h, rec(1, now - 40 * DAY), rec(2, now - 29 * DAY), rec(3, now))
    gone = h.prune(now, 30 * DAY)
    assert gone == [day_of(now - 40 * DAY)]
    assert {r["job_id"] for r in h.read()} == {2, 3}
    assert h.prune(now, 30 * DAY) == []


WRITER = """
import sys, time
sys.path.insert(0, {repo!r})
from ranch.ctld.jobs.history import FileHistory
h = FileHistory({dir!r})
now = time.time()
i = 0
while True:
    for _ in range(20):
        i += 1
        h.ended({{"job_id": i, "restarts": 0, "state": "COMPLETED", "end_time": now,
                 "name": "x" * 300}})
    batch = h.take()
    h.write(batch)
    h.written(batch, ok=True)
    print(i, flush=True)  # every record up to i is durable
"""


def test_sigkill_of_the_writer_loses_no_confirmed_record_and_tears_nothing(
        tmp_path: Path) -> None:
    folder = str(tmp_path / "hist")
    proc = subprocess.Popen([sys.executable, "-c", WRITER.format(repo=str(REPO), dir=folder)],
                            stdout=subprocess.PIPE, text=True)
    confirmed = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        confirmed = int(line)
        if confirmed >= 400:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    h = FileHistory(folder)
    got = [r["job_id"] for r in h.read()]
    assert len(got) == len(set(got))
    assert set(range(1, confirmed + 1)) <= set(got)
    # the restarted controller offers what it still holds; nothing is written twice
    write(h, *(rec(i, time.time()) for i in range(confirmed - 5, confirmed + 5)), verify=True)
    again = [r["job_id"] for r in FileHistory(folder).read()]
    raw = lines(h)
    assert len(again) == len(set(again)) and set(range(1, confirmed + 5)) <= set(again)
    assert len([x for x in raw if x.strip()]) >= len(again)
