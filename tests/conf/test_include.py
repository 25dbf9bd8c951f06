"""Include: relative to the including file, %c, cycles, missing files, files and config_hash."""

import hashlib
from pathlib import Path

import pytest

from ranch.conf.build import load_config
from ranch.conf.errors import ConfigError


def write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_include_relative_to_including_file_and_files_hash(tmp_path: Path) -> None:
    main = write(tmp_path / "slurm.conf", "ClusterName=Blue\nInclude conf.d/nodes.conf\n")
    nodes = write(tmp_path / "conf.d" / "nodes.conf", "NodeName=n[1-2]\ninclude parts.conf\n")
    parts = write(tmp_path / "conf.d" / "parts.conf", "PartitionName=p Nodes=ALL\n")
    cfg = load_config(main)
    assert [n.name for n in cfg.nodes] == ["n1", "n2"]
    assert cfg.partitions[0].nodes == ("n1", "n2")
    assert [name for name, _ in cfg.files] == [
        "slurm.conf", "conf.d/nodes.conf", "conf.d/parts.conf"]
    assert cfg.files[1][1] == nodes.read_text()
    digest = hashlib.sha256()
    for f in (main, nodes, parts):
        digest.update(f.read_bytes())
    assert cfg.config_hash == digest.hexdigest()


def test_percent_c_is_cluster_name(tmp_path: Path) -> None:
    main = write(tmp_path / "slurm.conf", 'ClusterName=Red\nInclude "%c.nodes"\n')
    write(tmp_path / "red.nodes", "NodeName=r1\n")
    assert [n.name for n in load_config(main).nodes] == ["r1"]


def test_include_cycle_is_an_error(tmp_path: Path) -> None:
    main = write(tmp_path / "a.conf", "Include b.conf\n")
    write(tmp_path / "b.conf", "NodeName=x\n\nInclude a.conf\n")
    with pytest.raises(ConfigError) as info:
        load_config(main)
    (e,) = info.value.errors
    assert (e.line, e.col) == (3, 9)
    assert e.path == str(tmp_path / "b.conf")
    assert "Include cycle: a.conf -> b.conf -> a.conf" in e.message


def test_missing_include_and_errors_in_included_file(tmp_path: Path) -> None:
    main = write(tmp_path / "main.conf", "Include inc.conf\nInclude gone.conf\n")
    write(tmp_path / "inc.conf", "NodeName=a CPUs=zero\n")
    with pytest.raises(ConfigError) as info:
        load_config(main)
    got = [(Path(e.path).name, e.line, e.col) for e in info.value.errors]
    assert got == [("main.conf", 2, 9), ("inc.conf", 1, 17)]
    assert "cannot read included file 'gone.conf'" in info.value.errors[0].message


def test_missing_main_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.conf")
    assert info.value.errors[0].format().endswith("cannot read config file: No such file or "
                                                  "directory")
