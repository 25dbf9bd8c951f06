"""The job history of a controller pair (StateStore=etcd): the day files, and each write and
prune also put to etcd (ctld/state/etcdrecords.py), so that the next leader serves racct."""

from __future__ import annotations

from typing import Any

import trio

from ranch.ctld.jobs.history import FileHistory
from ranch.ctld.state.etcdrecords import EtcdStore, drop_days, from_a_worker, put_history


class ReplicatedHistory(FileHistory):
    """FileHistory whose writes and prunes also go to etcd, from the worker thread that makes
    them (ctld/jobs/acct.py's keep_history). A write that cannot reach etcd fails whole, so its
    jobs stay in the snapshot and are offered again (the local copy is checked then)."""

    def __init__(self, directory: str, store: EtcdStore) -> None:
        super().__init__(directory)
        self.store = store

    def write(self, batch: list[dict[str, Any]]) -> int:
        from_a_worker()
        n = super().write(batch)
        trio.from_thread.run(put_history, self.store, batch)
        return n

    def prune(self, now: float, keep_seconds: float) -> list[str]:
        from_a_worker()
        gone = super().prune(now, keep_seconds)
        if gone:
            trio.from_thread.run(drop_days, self.store, gone)
        return gone
