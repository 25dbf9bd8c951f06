"""Ranch's commands under Slurm's names (sbatch, squeue, scancel, sinfo, scontrol, sacct, srun,
salloc, sshare, sacctmgr), for tools that call those names: `python -m ranch.cli.slurm_names
sbatch ARGS...` runs rbatch as sbatch. The wrapper scripts that do this are written by
`ranch-slurm-shims DIR` (cli/shims.py), so the names are taken over only where a user puts DIR
first on PATH.

Under a Slurm name, `--version`/`-V` prints `slurm 22.05.8` (what tools parse) and messages
start with that name; under Ranch's own names the version line is for people:
`ranch 0.2.0 (rbatch; speaks as slurm 22.05.8)`.
"""

from __future__ import annotations

import os
import sys

from ranch import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ranch.cli.sbatch_options import Options

RANCH_VERSION = __version__
SLURM_VERSION = "22.05.8"
# Slurm's name -> (Ranch's command, its module)
COMMANDS: dict[str, tuple[str, str]] = {
    "sbatch": ("rbatch", "ranch.cli.rbatch"),
    "squeue": ("rqueue", "ranch.cli.rqueue"),
    "scancel": ("rcancel", "ranch.cli.rcancel"),
    "sinfo": ("rinfo", "ranch.cli.rinfo"),
    "scontrol": ("rcontrol", "ranch.cli.rcontrol"),
    "sacct": ("racct", "ranch.cli.racct"),
    "srun": ("rrun", "ranch.cli.rrun"),
    "salloc": ("ralloc", "ranch.cli.ralloc"),
    "sshare": ("rshare", "ranch.cli.rshare"),
    "sacctmgr": ("racctmgr", "ranch.cli.racctmgr"),
    "seff": ("rseff", "ranch.cli.rseff"),  # slurm-wlm's contribs/seff (issue 48)
    "sdiag": ("rdiag", "ranch.cli.rdiag"),  # the scheduler's statistics (issue 44)
    "sprio": ("rsprio", "ranch.cli.rsprio"),  # priority/multifactor's factors (issue 44)
}
# What a missing command means, said in its Slurm name's voice.
NOT_YET: dict[str, str] = {}

_active: str | None = None  # the Slurm name this process runs under, if any


def activate(slurm_name: str) -> None:
    global _active
    _active = slurm_name


def active() -> str | None:
    return _active


def prog(ranch_name: str) -> str:
    """The name to speak as: the Slurm name this process was started under, else Ranch's."""
    if _active is not None and COMMANDS.get(_active, ("",))[0] == ranch_name:
        return _active
    return ranch_name


def version_text(ranch_name: str) -> str:
    if _active is not None:
        return f"slurm {SLURM_VERSION}"
    from ranch.protocol.release import version_text as release

    return f"{release()} ({ranch_name}; speaks as slurm {SLURM_VERSION})"


def module_path(module: str) -> str:
    """Where `module` (ranch.cli.xxx) would be, beside this file."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        module.rsplit(".", 1)[1] + ".py")


def main(argv: list[str] | None = None) -> int:
    import importlib

    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] not in COMMANDS:
        names = ", ".join(COMMANDS)
        print(f"usage: python -m ranch.cli.slurm_names {{{names}}} [ARGS...]", file=sys.stderr)
        return 2
    name, rest = args[0], args[1:]
    ranch, module = COMMANDS[name]
    if not os.path.exists(module_path(module)):
        if rest and rest[0] in ("-V", "--version"):
            print(f"slurm {SLURM_VERSION}")
            return 0
        print(f"{name}: error: {NOT_YET.get(ranch, f'{ranch} is not available yet')}",
              file=sys.stderr)
        return 1
    activate(name)
    return importlib.import_module(module).main(rest)


if __name__ == "__main__":
    sys.exit(main())


def opening(ranch_name: str, argv: list[str], options: Options, usage: str = ""
            ) -> tuple[dict[str, object], list[str]] | int:
    """A Slurm command's first steps, as its getopt_long and usage() do: the options parsed
    (a bad one: the error, the "Try --help" line, exit 1), --help/--usage printing `usage`
    and --version the release (exit 0); else (values, the words after the options)."""
    from ranch.cli import sbatch_options as so

    name = prog(ranch_name)
    try:
        values, rest = so.parse(argv, options=options)
    except so.OptionError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        print(f'Try "{name} --help" for more information', file=sys.stderr)
        return 1
    if usage and (values.get("help") or values.get("usage")):
        print(usage.format(name=name))
        return 0
    if values.get("version"):
        print(version_text(ranch_name))
        return 0
    return values, rest
