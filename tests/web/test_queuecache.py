"""The web layer's kept queue (ctld/web/queuecache.py): a listing after a change turns only the
jobs that changed, lists what the old decode-everything path listed, and a store that changes
while a long update yields is listed as it was or as it is, never half of each."""

from __future__ import annotations

import attrs
import orjson

from ranch.ctld.web import jobstats, queuecache
from ranch.ctld.web.queuecache import QueuePieces
from ranch.protocol.records import job_json, queue_doc


@attrs.define
class FakeJob:
    id: int
    shown: bytes


class Store:
    """The job store as the pieces read it: jobs by id, a generation, each job's encoding."""

    def __init__(self, n: int) -> None:
        self.gen = 0
        self.jobs = {i: FakeJob(i, self._record(i, "PENDING")) for i in range(1, n + 1)}

    @staticmethod
    def _record(i: int, state: str) -> bytes:
        return orjson.dumps({"job_id": i, "state": state, "uid": 1000 + i % 3, "name": f"j{i}",
                             "node_count": 1, "cpus": 2, "held": i % 5 == 0})

    def change(self, i: int, state: str) -> None:
        self.jobs[i].shown = self._record(i, state)  # a new object, as joblisting keeps one
        self.gen += 1


def _pieces(store: Store) -> QueuePieces:
    return QueuePieces(lambda: store.jobs, lambda: store.gen, lambda j: j.shown)


def test_only_changed_jobs_are_turned_again_and_the_listing_is_the_old_one() -> None:
    store = Store(1200)
    q = _pieces(store)
    first = q.now()
    store.change(7, "RUNNING")
    second = q.now()
    assert [p.doc is f.doc for p, f in zip(second, first, strict=True)].count(False) == 1
    assert second[6].doc != first[6].doc
    records = [orjson.loads(j.shown) for j in store.jobs.values()]
    doc = queue_doc([], 1.0, version="v", user="", command=["GET", "/api/v1/jobs"])
    assert orjson.loads(queuecache.listing(doc, second)) == queue_doc(
        records, 1.0, version="v", user="", command=["GET", "/api/v1/jobs"])
    assert jobstats.counts(p.counted for p in second) == jobstats.counts(records)
    assert [p.owner for p in second] == [r["uid"] for r in records]
    assert q.now() is not second and [p.doc for p in q.now()] == [p.doc for p in second]
    assert [p.doc for p in second] == [orjson.dumps(job_json(r)) for r in records]


def test_a_store_that_changes_while_an_update_yields_is_listed_as_it_was_or_as_it_is() -> None:
    store = Store(3 * queuecache.CHUNK)
    q = _pieces(store)
    steps = q.steps()
    next(steps)  # a long first update, paused after its first chunk
    store.change(1, "RUNNING")  # already turned: listed as it was this time
    store.change(3 * queuecache.CHUNK, "CANCELLED")  # not yet: listed as it is
    store.jobs[9999] = FakeJob(9999, Store._record(9999, "PENDING"))  # after the copy: next time
    store.gen += 1
    while True:
        try:
            next(steps)
        except StopIteration as done:
            got = done.value
            break
    states = {orjson.loads(p.doc)["job_id"]: orjson.loads(p.doc)["job_state"] for p in got}
    assert len(got) == 3 * queuecache.CHUNK and 9999 not in states
    assert states[1] == ["PENDING"] and states[3 * queuecache.CHUNK] == ["CANCELLED"]
    again = {orjson.loads(p.doc)["job_id"]: orjson.loads(p.doc)["job_state"] for p in q.now()}
    assert again[1] == ["RUNNING"] and again[9999] == ["PENDING"]  # the next one catches up


def _ids(pieces: list) -> list[int]:
    return [orjson.loads(p.doc)["job_id"] for p in pieces]


def test_a_page_catches_up_with_only_what_changed_since_its_listing() -> None:
    """A page holding a listing (its mark) and applying each delta holds what the whole listing
    would give, after changes, removals and new jobs, over several updates."""
    store = Store(50)
    q = _pieces(store)
    held = {orjson.loads(p.doc)["job_id"]: p.doc for p in q.now()}
    mark = q.mark
    assert q.delta(mark) == queuecache.Delta([], [])  # nothing changed: nothing sent
    store.change(7, "RUNNING")
    q.now()  # another page's update in between
    del store.jobs[9]
    store.jobs[51] = FakeJob(51, Store._record(51, "PENDING"))
    store.change(8, "RUNNING")
    whole = q.now()
    delta = q.delta(mark)
    assert delta is not None
    assert _ids(delta.pieces) == [7, 8, 51]
    assert delta.gone == [(9, 1000 + 9 % 3)]  # with its owner, for PrivateData
    for p in delta.pieces:
        held[orjson.loads(p.doc)["job_id"]] = p.doc
    for jid, _ in delta.gone:
        del held[jid]
    assert held == {orjson.loads(p.doc)["job_id"]: p.doc for p in whole}
    assert q.delta(q.mark) == queuecache.Delta([], [])


def test_a_listing_too_old_or_from_another_controller_gets_the_whole() -> None:
    store = Store(5)
    q = _pieces(store)
    q.now()
    mark = q.mark
    for _ in range(queuecache.HISTORY + 1):
        store.change(1, "RUNNING")
        q.now()
    assert q.delta(mark) is None  # its update fell out of those remembered
    other = _pieces(store)  # a new controller: its generations start again
    other.now()
    assert other.delta(q.mark) is None and other.delta("junk") is None
    assert other.delta(other.mark) == queuecache.Delta([], [])


def test_an_update_overtaken_by_one_that_could_not_yield_is_not_kept() -> None:
    """The header's counts (now) run while a page's long update is paused: the paused one
    ends with the older view and leaves the kept pieces and their history to the newer."""
    store = Store(2 * queuecache.CHUNK)
    q = _pieces(store)
    q.now()
    mark = q.mark
    for i in range(1, queuecache.CHUNK + 2):
        store.change(i, "RUNNING")
    steps = q.steps()
    next(steps)  # job 1 turned as RUNNING
    store.change(1, "COMPLETED")
    store.change(2 * queuecache.CHUNK, "CANCELLED")
    q.now()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            overtaken = done.value
            break
    delta = q.delta(mark)
    assert delta is not None and len(delta.pieces) == queuecache.CHUNK + 2
    assert q.delta(q.mark) == queuecache.Delta([], [])

    def state(pieces: list, job: int) -> list[str]:
        return next(orjson.loads(p.doc)["job_state"] for p in pieces
                    if orjson.loads(p.doc)["job_id"] == job)

    # the listing a page gets with the mark is the kept one, not the overtaken update's
    assert state(overtaken, 1) == ["RUNNING"] and state(q.listed(), 1) == ["COMPLETED"]
