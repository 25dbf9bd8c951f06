"""racctmgr (sacctmgr), read-only: Ranch keeps no accounting database, so every request is
answered as sacctmgr answers on a Slurm without slurmdbd (refused, exit 1; measured side by side
in tests/conformance/test_value_matrix.py), and tools that look an account up go on without it."""

from __future__ import annotations

import sys

from ranch.cli import sbatch_options as so
from ranch.cli.controller import run_main
from ranch.cli.slurm_names import prog, version_text

OPTIONS = so.Options((
    so.Opt("associations", "s", so.NO), so.Opt("help", "h", so.NO),
    so.Opt("immediate", "i", so.NO), so.Opt("noheader", "n", so.NO),
    so.Opt("parsable", "p", so.NO), so.Opt("parsable2", "P", so.NO),
    so.Opt("quiet", "Q", so.NO), so.Opt("readonly", "r", so.NO),
    so.Opt("verbose", "v", so.NO), so.Opt("version", "V", so.NO), so.Opt("usage", "", so.NO),
    so.Opt("json", "", so.NO), so.Opt("yaml", "", so.NO),
))
NO_DATABASE = ("You are not running a supported accounting_storage plugin\n"
               "Only 'accounting_storage/slurmdbd' is supported.\n")


def run(argv: list[str]) -> int:
    name = prog("racctmgr")
    try:
        values, _rest = so.parse(argv, options=OPTIONS)
    except so.OptionError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        print(f'Try "{name} --help" for more information', file=sys.stderr)
        return 1
    if values.get("version"):
        print(version_text("racctmgr"))
        return 0
    sys.stderr.write(NO_DATABASE)
    return 1


def main(argv: list[str] | None = None) -> int:
    return run_main("racctmgr", run, argv)


if __name__ == "__main__":
    sys.exit(main())
