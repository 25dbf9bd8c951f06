"""The configless cache: SPOOL/conf-cache/ holds the served files and the node settings.

`cache.json` (settings, files, hash) is the truth, replaced atomically; the plain copies of the
files beside it are for admins to read.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import attrs
import orjson

from ranch.protocol import durable
from ranch.protocol.codec import converter
from ranch.protocol.messages import ConfigFile, NodeSettings

log = logging.getLogger("rnoded.cache")

CACHE_DIR = "conf-cache"
CACHE_FILE = "cache.json"


@attrs.frozen
class CachedConfig:
    settings: NodeSettings
    files: tuple[ConfigFile, ...]
    config_hash: str


def _write_atomic(path: Path, data: bytes) -> None:
    durable.write_atomic(path, data)


def _safe_name(name: str) -> str | None:
    """A served file name kept inside the cache dir (no absolute paths, no ..)."""
    if "\0" in name:
        return None
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or ".." in parts:
        return None
    return os.path.join(*parts)


def save(spool_dir: str, cached: CachedConfig) -> Path:
    root = Path(spool_dir) / CACHE_DIR
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    for f in cached.files:
        rel = _safe_name(f.name)
        if rel is None:
            log.warning("not caching served file with unsafe name %r", f.name)
            continue
        target = root / "files" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(target, f.text.encode())
    path = root / CACHE_FILE
    _write_atomic(path, orjson.dumps(converter.unstructure(cached), option=orjson.OPT_INDENT_2))
    return path


def load(spool_dir: str) -> CachedConfig | None:
    """The cached config, or None when there is none or it cannot be read (logged)."""
    path = Path(spool_dir) / CACHE_DIR / CACHE_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read config cache %s: %s", path, exc.strerror)
        return None
    try:
        return converter.structure(orjson.loads(data), CachedConfig)
    except Exception as exc:
        log.warning("ignoring unreadable config cache %s: %s", path, exc)
        return None
