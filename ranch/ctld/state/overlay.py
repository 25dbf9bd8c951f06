"""The saved state at start: the snapshot with the journal's records laid over it (the store's
`load` gives both, ctld/state/store.py); each owner then restores its own part."""

from __future__ import annotations

import logging
from typing import Any

from ranch.ctld import logs


def overlay(doc: dict[str, Any] | None, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The snapshot with the journal's records laid over it, in order (a record replaces the
    node's or job's entry, or the whole accounting tree). Lines of the version-4 submission
    journal (a bare job record) add only jobs the snapshot never held."""
    doc = dict(doc or {})
    nodes = dict(doc.get("nodes") or {})
    saved_jobs = doc.get("jobs") or {}
    resv = {str(r.get("name")): r for r in (doc.get("reservations") or {}).get("items", ())
            if isinstance(r, dict)}
    next_id = int(saved_jobs.get("next_id", 1))
    accounts = doc.get("accounts")
    jobs: dict[int, Any] = {int(j["id"]): j for j in saved_jobs.get("jobs", ())
                            if isinstance(j, dict) and "id" in j}
    for rec in records:
        try:
            if "node" in rec:
                nodes[str(rec["node"])] = rec["entry"]
            elif "resv" in rec:  # a reservation's record; None: it was deleted
                if rec["entry"] is None:
                    resv.pop(str(rec["resv"]), None)
                else:
                    resv[str(rec["resv"])] = rec["entry"]
            elif "acct" in rec:  # the accounting tree, whole (ctld/accounts/)
                accounts = rec["acct"]
            elif "job" in rec:
                jobs[int(rec["job"]["id"])] = rec["job"]
            elif "id" in rec and "seq" not in rec:  # version 4: a submission
                jid = int(rec["id"])
                if jid not in jobs and jid >= next_id:
                    jobs[jid] = rec
        except (KeyError, TypeError, ValueError) as exc:
            logs.event("journal record unreadable; skipped", logging.WARNING, error=repr(exc))
    top = max(jobs, default=0)
    doc["nodes"] = nodes
    if accounts is not None:
        doc["accounts"] = accounts
    doc["jobs"] = {"next_id": max(next_id, top + 1), "jobs": list(jobs.values())}
    counter = int((doc.get("reservations") or {}).get("counter", 0))
    for name in resv:  # a created one the snapshot lacks: its USER_N suffix counts
        tail = name.rsplit("_", 1)[-1]
        if tail.isdigit():
            counter = max(counter, int(tail))
    doc["reservations"] = {"counter": counter, "items": list(resv.values())}
    return doc
