"""rqueue's whole-column builders (squeue_fields.COLUMNS) print what the per-cell getters
(squeue_fields.FIELDS) print, for every kind of record the controller sends."""

from __future__ import annotations

from ranch.cli.squeue_fields import COLUMNS, FIELDS

NOW = 1_800_000_000.0
RECORDS = [
    {"job_id": 1, "array_job_id": 0, "array_task_id": None, "partition": "main", "name": "a",
     "user": "alice", "state": "PENDING", "start_time": None, "end_time": None,
     "time_limit": None, "node_count": 1, "nodes": "", "reason": "Priority"},
    {"job_id": 7, "array_job_id": 5, "array_task_id": 2, "partition": "gpu", "name": "b",
     "user": "bob", "state": "RUNNING", "start_time": NOW - 3725, "end_time": None,
     "time_limit": 90, "node_count": 2, "nodes": "n[1-2]", "reason": "None"},
    {"job_id": 8, "array_job_id": 0, "array_task_id": None, "partition": "main", "name": "c",
     "user": "carol", "state": "COMPLETED", "start_time": NOW - 200000, "end_time": NOW - 90,
     "time_limit": 1, "node_count": 1, "nodes": "n3", "reason": ""},
    {"job_id": 9, "array_job_id": 9, "array_task_id": "[1-3,5]", "partition": "main",
     "name": "d", "user": "dave", "state": "PENDING", "start_time": 0, "end_time": None,
     "time_limit": 10, "node_count": 1, "nodes": "", "reason": None},
    {"job_id": 10, "state": "COMPLETING", "start_time": NOW - 5, "nodes": "n4"},
    {"job_id": 11, "state": "SUSPENDED", "start_time": None, "reason": "JobHeldUser"},
]


def test_each_column_is_its_getter_cell_by_cell() -> None:
    for letter, column in COLUMNS.items():
        getter = FIELDS[letter][1]
        assert column(RECORDS, NOW) == [getter(j, NOW) for j in RECORDS], letter
