"""Checksums on what rctld writes to StateSaveLocation, and the refusal of a damaged file."""

# zlib.crc32 rather than a cryptographic hash: stdlib, C speed (sealing a 5 MB snapshot costs
# about 6 ms with its copy, a 600-byte journal record 1 us), and it guards against what happens to
# state files (torn writes, a cut or zeroed file, flipped bytes: a random change escapes it with
# odds of 1 in 2**32, a burst up to 32 bits never), not against someone who may write the
# directory, who could rewrite any checksum as well. A sealed JSON document stays one JSON
# object: '{"crc":"1a2b3c4d",' then the rest as orjson wrote it, which the checksum covers.
# Older files (no "crc") are read as they decode (docs/limits.md says what that misses).

from __future__ import annotations

import itertools
import os
import re
import time
import zlib
from collections.abc import Iterable

from ranch.protocol.durable import write_all

PREFIX = b'{"crc":"'
HEAD = len(PREFIX) + 10  # the prefix, 8 hex digits, '",'
MARGIN = 1000  # job ids skipped past the highest one seen when state is ignored (-i)


class DamagedState(Exception):
    """A state file failed its check; str() is the one line rctld prints before it stops."""

    def __init__(self, path: str, offset: int, what: str) -> None:
        self.path, self.offset, self.what = path, offset, what
        super().__init__(
            f"damaged state: {path} at byte {offset}: {what}. Nothing was changed; restore the "
            "file from a backup, or start rctld with -i (--ignore-damaged-state) to move it "
            "aside and start without what it holds")


def seal(body: bytes) -> bytes:
    """`body` (an orjson-encoded non-empty object) with its checksum first."""
    rest = body[1:]
    return b'%s%08x",%s' % (PREFIX, zlib.crc32(rest), rest)


def write_sealed(pieces: Iterable[bytes], fd: int) -> None:
    """seal() of the object whose JSON `pieces` give in order, written to `fd` as they come
    (durable.write_atomic_by fsyncs it): the checksum's place first, the rest with its
    checksum taken on the way, then the checksum written into its place. The body is never
    whole in memory (96 MB at 50,000 nodes: with orjson's buffer it was most of the state
    save's memory peak)."""
    it = iter(pieces)
    first = next(it)
    if first[:1] != b"{":
        raise ValueError("a sealed document is a JSON object")
    write_all(fd, b" " * HEAD)
    crc = 0
    rest: Iterable[bytes | memoryview] = itertools.chain((memoryview(first)[1:],), it)
    for piece in rest:
        crc = zlib.crc32(piece, crc)
        write_all(fd, piece)
    head = b'%s%08x",' % (PREFIX, crc)
    if os.pwrite(fd, head, 0) != HEAD:
        raise OSError("short write of the state file's checksum")


def check(data: bytes) -> tuple[bool, str | None]:
    """(sealed, None when it checks out else what is wrong) for one sealed or older document."""
    if not data.startswith(PREFIX):
        return False, None
    digits, comma = data[len(PREFIX):HEAD - 2], data[HEAD - 2:HEAD]
    try:
        want = int(digits, 16)
    except ValueError:
        return True, "checksum field is garbled"
    if comma != b'",' or len(digits) != 8:
        return True, "checksum field is garbled"
    if zlib.crc32(data[HEAD:]) != want:
        return True, "checksum mismatch"
    return True, None


def move_aside(path: str) -> str:
    """Rename `path` to a name of its own beside it (never over another file); the new name."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1000):
        target = f"{path}.damaged-{stamp}" + (f".{n}" if n else "")
        if not os.path.exists(target):
            os.rename(path, target)
            return target
    raise OSError(f"no free name to move {path} aside")


_ID = re.compile(rb'"(?:id|job_id|next_id|array_job_id)":(\d{1,9})')


def highest_id(data: bytes) -> int:
    """The highest job id written anywhere in `data` (damaged or not): a floor for new ids."""
    return max((int(x) for x in _ID.findall(data)), default=0)
