"""A node's reported hardware as the controller keeps it: its JSON deflated against a shared
dictionary.

Nodes of one cluster report nearly the same hardware (the same keys, GPU models, driver; only
names, UUIDs and bus ids differ), so deflating each report against the first one the controller
saw keeps about 90 bytes where the JSON is 1.5-2.5 KB: 15-25 MB at 10,000 nodes (issue 35). The
standard library's zlib does it; its small-window, small-memory compressor costs 8 us per
registration (the default one 55: its setup, not the data, dominates at this size) and 2 us to
read back, which only the state file, the journal and `rcontrol show node`'s Arch/OS need.
"""

from __future__ import annotations

import zlib

import orjson

from ranch.protocol import messages as m
from ranch.protocol.codec import converter

WBITS = -13  # raw deflate, an 8 KB window: the dictionary and a report both fit in it
MEM_LEVEL = 4
LEVEL = 6


class PackedHardware:
    """One report, deflated; it carries the dictionary it was deflated against (shared, not
    copied), so reading it back needs nothing else."""

    __slots__ = ("deflated", "zdict")

    def __init__(self, zdict: bytes, deflated: bytes) -> None:
        self.zdict = zdict
        self.deflated = deflated

    def json(self) -> bytes:
        """The report as the state file holds it (orjson of the unstructured Hardware)."""
        return zlib.decompressobj(WBITS, zdict=self.zdict).decompress(self.deflated)

    def __len__(self) -> int:  # what it costs to keep, for tests and the bench
        return len(self.deflated)


class HardwareShelf:
    """Packs reports; owns the dictionary they are deflated against: the first report it packs
    (a later report unlike it still packs correctly, only less tightly)."""

    def __init__(self) -> None:
        self.zdict: bytes | None = None

    def pack(self, hw: m.Hardware) -> PackedHardware:
        return self.pack_json(orjson.dumps(converter.unstructure(hw)))

    def pack_json(self, data: bytes) -> PackedHardware:
        zdict = self.zdict
        if zdict is None:
            zdict = self.zdict = bytes(memoryview(data))  # orjson's spare capacity left behind
        c = zlib.compressobj(LEVEL, zlib.DEFLATED, WBITS, MEM_LEVEL, zdict=zdict)
        return PackedHardware(zdict, c.compress(data) + c.flush())
