"""argparse whose errors are one stderr line and exit status 1 (as Slurm's commands), speaking
as a Slurm name when run under one (imported only when a command line needs argparse)."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


class UsageParser(argparse.ArgumentParser):
    """argparse whose errors are one stderr line and exit status 1 (255 for sbatch, srun and
    salloc), as Slurm's commands' usage errors (tools branch on it; argparse's own is 2); under a
    Slurm name (cli/slurm_names.py) it speaks as that name."""

    def __init__(self, *args, **kwargs) -> None:
        from ranch.cli.slurm_names import prog

        if "prog" in kwargs:
            kwargs["prog"] = prog(kwargs["prog"])
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        from ranch.cli.controller import LAUNCHER_USAGE, LAUNCHERS

        code = LAUNCHER_USAGE if self.prog in LAUNCHERS else 1
        self.exit(code, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
