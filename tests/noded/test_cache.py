"""The configless cache under SPOOL/conf-cache/."""

from __future__ import annotations

from pathlib import Path

from ranch.noded import cache
from ranch.protocol.messages import ConfigFile, NodeSettings

SETTINGS = NodeSettings("c", 10.0, 300.0, 10.0, "/hc", 60.0, 20.0, ("IDLE", "CYCLE"))


def test_round_trip_and_unsafe_names(tmp_path: Path) -> None:
    files = (
        ConfigFile("cluster.conf", "a\n"),
        ConfigFile("inc/nodes.conf", "b\n"),
        ConfigFile("../evil", "x"),
        ConfigFile("/etc/evil", "x"),
    )
    stored = cache.CachedConfig(SETTINGS, files, "h1")
    cache.save(str(tmp_path), stored)
    assert cache.load(str(tmp_path)) == stored
    root = tmp_path / "conf-cache"
    assert (root / "files" / "inc" / "nodes.conf").read_text() == "b\n"
    assert not (tmp_path / "evil").exists() and not (root / "evil").exists()
    assert sorted(p.name for p in root.iterdir()) == ["cache.json", "files"]  # no temp files


def test_missing_or_corrupt(tmp_path: Path) -> None:
    assert cache.load(str(tmp_path)) is None
    (tmp_path / "conf-cache").mkdir()
    (tmp_path / "conf-cache" / "cache.json").write_text("{broken")
    assert cache.load(str(tmp_path)) is None


def test_nul_or_empty_names_are_skipped_not_raised(tmp_path: Path) -> None:
    files = (ConfigFile("a\0b.conf", "x"), ConfigFile("", "y"), ConfigFile("ok.conf", "z"))
    stored = cache.CachedConfig(SETTINGS, files, "h2")
    cache.save(str(tmp_path), stored)
    assert cache.load(str(tmp_path)) == stored
    assert [p.name for p in (tmp_path / "conf-cache" / "files").iterdir()] == ["ok.conf"]
