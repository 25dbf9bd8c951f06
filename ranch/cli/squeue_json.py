"""`rqueue --json`: squeue's JSON document ({"jobs": [...], "meta": ..., "errors", "warnings"})
with each job in the field names and number objects of Slurm's data_parser."""

from __future__ import annotations

import getpass

from ranch.cli.rinfo import VERSION
from ranch.protocol.records import job_json as job_doc
from ranch.protocol.records import queue_doc

__all__ = ["document", "job_doc"]


def document(jobs: list[dict], now: float, command: list[str]) -> str:
    import orjson

    doc = queue_doc(jobs, now, version=VERSION, user=getpass.getuser(), command=command)
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
