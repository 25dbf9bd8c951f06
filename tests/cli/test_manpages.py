"""The man pages (man/generate.py): each builds without a troff warning, lists every option its
program takes, and the pages in man/ are the ones the option tables give today."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("ranch_man_generate", REPO / "man" / "generate.py")
assert _spec is not None and _spec.loader is not None
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)

NAMES = [name for name, *_ in generate.PROGRAMS]


def _options(name: str) -> list[str]:
    """Every option string of `name`, read from the program's own definitions."""
    from ranch.cli import ralloc, sbatch_options

    if name == "rbatch":
        table = [*sbatch_options._TABLE, *sbatch_options.RANCH_OPTS]
    elif name == "ralloc":
        table = list(ralloc.OPTIONS.table)
    else:
        target = {"rctld": "ranch.ctld.main:build_parser", "rnoded": "ranch.noded.main:parser",
                  "ranch-healthcheck": "ranch.healthcheck.__main__:build_parser",
                  "ranch-slurm-shims": "ranch.cli.shims:build_parser"}.get(name,
                                                                      f"ranch.cli.{name}:build_parser")
        module, _, attr = target.partition(":")
        parser = getattr(importlib.import_module(module), attr)()
        return [s for a in parser._actions if a.help != argparse.SUPPRESS
                for s in a.option_strings]
    return [f"--{o.long}" for o in table if o.help] + [f"-{o.short}" for o in table
                                                       if o.help and o.short]


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
@pytest.mark.parametrize("name", NAMES)
def test_page_builds_and_lists_every_option(name: str, tmp_path: Path) -> None:
    section, text = generate.page(name)
    assert section == (8 if name in ("rctld", "rnoded", "ranch-healthcheck") else 1)
    path = tmp_path / f"{name}.{section}"
    path.write_text(text)
    done = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-P-cbou", str(path)],
                          capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin", "MANWIDTH": "200"})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    shown = done.stdout.replace("\u2010", "-").replace("\u2212", "-")
    options = _options(name)
    assert "--version" in options or "-V" in options
    missing = [o for o in options if o not in shown]
    assert not missing, f"{name}(8|1) lacks {missing}"
    if section == 8 and name != "ranch-healthcheck":
        assert "SIGNALS" in shown and "SIGHUP" in shown and "SIGUSR2" in shown


def test_pages_in_the_tree_are_current(tmp_path: Path) -> None:
    written = generate.write_all(tmp_path)
    for path in written:
        kept = REPO / "man" / path.relative_to(tmp_path)
        assert kept.exists() and kept.read_text() == path.read_text(), (
            f"{kept} is stale: run `make man`")
