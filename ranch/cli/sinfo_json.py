"""`rinfo --json`: sinfo --json's document (reference §8); built in ranch.protocol.records, which
rctld's HTTP API shares."""

from __future__ import annotations

from collections.abc import Callable

from ranch.protocol.records import number, partition_doc, state_array
from ranch.protocol.sinforecords import sinfo_doc as build

Fold = Callable[[list[str]], str]
# Node-record keys this document (and rinfo's node selection) reads: GetSnapshot.fields.
READS = (
    "name", "partitions", "state", "complete", "compact", "cpus", "cpus_alloc", "cpu_load",
    "sockets", "cores_per_socket", "threads_per_core", "real_memory", "alloc_mem", "free_mem",
    "tmp_disk", "weight", "features", "gres", "gres_used", "port", "hostname", "addr",
)
__all__ = ["READS", "build", "number", "partition_doc", "state_array"]
