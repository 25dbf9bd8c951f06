"""argparse whose errors are one stderr line and exit status 2, speaking as a Slurm name when run
under one (imported only when a command line needs argparse: see cli/quickargs.py)."""

from __future__ import annotations

import argparse


class UsageParser(argparse.ArgumentParser):
    """argparse whose errors are one stderr line and exit status 2; under a Slurm name
    (cli/slurm_names.py) it speaks as that name."""

    def __init__(self, *args, **kwargs) -> None:
        from cli.slurm_names import prog

        if "prog" in kwargs:
            kwargs["prog"] = prog(kwargs["prog"])
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
