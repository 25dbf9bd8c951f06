"""Bytes the controller keeps (caches, saved records), stored without orjson's spare capacity."""

from __future__ import annotations


def kept(data: bytes) -> bytes:
    """A copy of orjson output that is exactly its length, for bytes the controller keeps.

    orjson.dumps returns bytes with spare capacity: a 1 KB result holds 4 KB of memory and a
    5 MB one up to 8 MB. Per node that was 8 KB of the state-file and hardware caches
    (docs/benchmarks.md, hot spot 3)."""
    return bytes(memoryview(data))
