"""Key files: permissions enforced with the chmod to run, creation, and path precedence."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ranch.protocol.auth import (
    DEFAULT_KEY_FILE,
    KeyFileError,
    create_key,
    load_key,
    resolve_key_path,
)


def test_create_then_load(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "ranch" / "ranch.key"
    key = create_key(str(path))
    assert len(key) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key(str(path)) == key
    assert os.listdir(path.parent) == ["ranch.key"]  # no temp file left behind


def test_create_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "k"
    key = create_key(str(path))
    with pytest.raises(FileExistsError):
        create_key(str(path))
    assert load_key(str(path)) == key


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_group_or_other_access_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "k"
    create_key(str(path))
    path.chmod(mode)
    with pytest.raises(KeyFileError) as info:
        load_key(str(path))
    assert f"chmod 600 {path}" in str(info.value)
    assert f"{mode:04o}" in str(info.value)


def test_missing_and_short(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="does not exist"):
        load_key(str(tmp_path / "nope"))
    short = tmp_path / "short"
    short.write_bytes(b"abc")
    short.chmod(0o600)
    with pytest.raises(KeyFileError, match="3 bytes"):
        load_key(str(short))


def test_resolve_precedence() -> None:
    env = {"RANCH_KEY_FILE": "/env.key"}
    assert resolve_key_path("/cli.key", "/conf.key", env=env) == "/cli.key"
    assert resolve_key_path(None, "/conf.key", env=env) == "/env.key"
    assert resolve_key_path(None, "/conf.key", env={}) == "/conf.key"
    assert resolve_key_path(None, None, env={}) == DEFAULT_KEY_FILE
