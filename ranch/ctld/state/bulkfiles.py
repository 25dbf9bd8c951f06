"""The files of the jobs' bulk, their scripts and environments, under StateSaveLocation/jobs/:
written once, read when a job launches, never held in memory nor rewritten by a state save.

Each snapshot packs the bulk of every job new since the last one into one file, jobs/bulk.N,
and each job keeps where its entry is (`Job.bulk_at`); the file goes once every job in it is
purged. slurmctld's layout, a directory and two files per job (hash.N/job.ID/{script,
environment}), cost this machine's ext4 0.8 ms of kernel CPU per job, more than the rest of a
submission (docs/benchmarks.md, issue 23); a pack costs one create and one fsync per snapshot.
Jobs saved by earlier versions keep their hash.N/job.ID directories, read and removed as before.

Each entry is sealed: 8 hex digits of the zlib.crc32 of the rest of it (ctld/state/integrity.py says
why crc32); entries of earlier releases (no checksum, they begin with "[") are read as they decode.
A damaged entry is refused in words (ValueError): its one job fails, nothing else is touched.

A submission's journal record holds the bulk until then; before a snapshot lets that record's
segment go, the snapshot writes (and fsyncs) the pack.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import zlib

import orjson

from ranch.protocol import durable

PACK_PREFIX = "bulk."
Bulk = tuple[str, tuple[tuple[str, str], ...]]  # (script, environment)


def jobs_dir(state_dir: str) -> str:
    return os.path.join(state_dir, "jobs")


def pack_path(state_dir: str, pack: int) -> str:
    return os.path.join(jobs_dir(state_dir), f"{PACK_PREFIX}{pack}")


def packs(state_dir: str) -> list[int]:
    """The numbers of the pack files there, in order."""
    try:
        names = os.listdir(jobs_dir(state_dir))
    except OSError:
        return []
    return sorted(int(name[len(PACK_PREFIX):]) for name in names
                  if name.startswith(PACK_PREFIX) and name[len(PACK_PREFIX):].isdigit())


def write_pack(state_dir: str, pack: int, items: list[tuple[int, str, tuple | bytes]]
               ) -> list[tuple[int, int, int]]:
    """Blocking (the snapshot's thread): one file holding each item's (job id, script,
    environment or that already as JSON), fsync'd with its directory; (job id, offset, length)
    of each entry. An entry is a JSON line [id, environment, script bytes] followed by the
    script's bytes as they came (a script need not be UTF-8)."""
    if not items:
        return []
    chunks: list[bytes] = []
    placed: list[tuple[int, int, int]] = []
    at = 0
    for job_id, script, env in items:
        raw = script.encode("utf-8", "surrogateescape")
        env_json = env if isinstance(env, bytes) else orjson.dumps(env)
        body = b"[%d,%s,%d]\n%s" % (job_id, env_json, len(raw), raw)
        entry = b"%08x%s" % (zlib.crc32(body), body)
        chunks.append(entry)
        placed.append((job_id, at, len(entry)))
        at += len(entry)
    directory = jobs_dir(state_dir)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(pack_path(state_dir, pack), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        durable.write_all_fsync(fd, b"".join(chunks))
    finally:
        os.close(fd)
    durable.fsync_dir(directory)  # the new file's name is durable too
    return placed


def read_packed(state_dir: str, job_id: int, where: tuple[int, int, int]) -> Bulk:
    """A job's script and environment from its pack entry; OSError/ValueError (naming the
    file and offset) if unreadable or damaged."""
    pack, offset, length = where
    path = pack_path(state_dir, pack)
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.pread(fd, length, offset)
    finally:
        os.close(fd)

    def damaged(what: str) -> ValueError:
        return ValueError(f"{path} at byte {offset}: the entry of job {job_id} {what}")

    if len(data) != length:
        raise damaged(f"is cut ({len(data)} of {length} bytes)")
    if not data.startswith(b"["):  # sealed: crc32 of the rest first
        try:
            want = int(data[:8], 16)
        except ValueError:
            raise damaged("has a garbled checksum") from None
        data = data[8:]
        if zlib.crc32(data) != want:
            raise damaged("fails its checksum")
    head, _, raw = data.partition(b"\n")
    try:
        got_id, env, size = orjson.loads(head)
        env_pairs = tuple((str(k), str(v)) for k, v in env)
    except (orjson.JSONDecodeError, TypeError, ValueError):
        raise damaged("is garbled") from None
    if got_id != job_id or len(raw) != size:
        raise damaged(f"holds job {got_id!r} ({len(raw)} of {size!r} bytes)")
    return raw.decode("utf-8", "surrogateescape"), env_pairs


def remove_pack(state_dir: str, pack: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(pack_path(state_dir, pack))


# -- the per-job directories of earlier versions --------------------------------------------


def job_dir(state_dir: str, job_id: int) -> str:
    return os.path.join(jobs_dir(state_dir), f"hash.{job_id % 10}", f"job.{job_id}")


def read(state_dir: str, job_id: int) -> Bulk:
    """The job's script and environment from its own directory; OSError/ValueError if they
    are gone or unreadable."""
    path = job_dir(state_dir, job_id)
    with open(os.path.join(path, "script"), "rb") as f:
        script = f.read().decode("utf-8", "surrogateescape")
    with open(os.path.join(path, "environment"), "rb") as f:
        raw = f.read()
    try:
        env = tuple((str(k), str(v)) for k, v in orjson.loads(raw))
    except (orjson.JSONDecodeError, TypeError, ValueError):
        raise ValueError(f"{path}/environment is garbled") from None
    return script, env


def remove(state_dir: str, job_id: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(job_dir(state_dir, job_id))
