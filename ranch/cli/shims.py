"""`ranch-slurm-shims DIR`: write small wrapper scripts named sbatch, squeue, scancel, sinfo,
scontrol, sacct, srun, salloc, sshare, sprio and sacctmgr into DIR, each running Ranch's command
under that name
(cli/slurm_names.py). Nothing is installed under those names otherwise: a user (or a test)
opts in by putting DIR first on PATH, so a machine that has Slurm keeps its own commands
everywhere else.

A name whose Ranch command does not exist yet (srun -> rrun) still gets a
shim: it says what is missing and exits 1 (tools such as submitit check that srun exists).
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import sys
from pathlib import Path

from ranch.cli.slurm_names import COMMANDS, module_path

MARK = "# written by ranch-slurm-shims"
# A Python script that Python runs itself: a shell between the caller and Ranch would drop the
# variables whose names are no shell names, dash all of them, and exported bash functions
# (`export -f`, Lmod's and Environment Modules' `module`: BASH_FUNC_module%%) would never
# reach the job.
TEMPLATE = """#!{python} -I
{mark}: Slurm's `{name}` runs Ranch's {ranch}.
# Remove this file (or take {dir} off PATH) to give the name back.
import sys; sys.path.insert(0, {root!r})
from ranch.cli.controller import exit_now; from ranch.cli.slurm_names import main
exit_now(main([{name!r}, *sys.argv[1:]]))
"""
# where the interpreter's path cannot be a #! line (blanks in it, or longer than the kernel
# reads): through sh, which keeps every variable whose name is a shell name
SH_TEMPLATE = """#!/bin/sh
{mark}: Slurm's `{name}` runs Ranch's {ranch}.
# Remove this file (or take {dir} off PATH) to give the name back.
exec {python} -I -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); \\
from ranch.cli.controller import exit_now; from ranch.cli.slurm_names import main; \\
exit_now(main())' \\
  {root} {name} "$@"
"""
SHEBANG_MAX = 120  # Linux reads 127 bytes of a #! line before 5.1


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def shim_text(name: str, directory: Path, python: str, root: str) -> str:
    if len(python) <= SHEBANG_MAX and not any(c.isspace() for c in python):
        return TEMPLATE.format(mark=MARK, name=name, ranch=COMMANDS[name][0], dir=directory,
                               python=python, root=root)
    return SH_TEMPLATE.format(mark=MARK, name=name, ranch=COMMANDS[name][0], dir=directory,
                              python=_quote(python), root=_quote(root))


def write(directory: Path, *, force: bool = False, python: str = sys.executable) -> list[str]:
    """Write every shim; returns the notes for the person (Slurm commands found elsewhere,
    names whose Ranch command is not there yet). Refuses to replace a file it did not write."""
    root = str(Path(__file__).resolve().parents[2])
    directory.mkdir(parents=True, exist_ok=True)
    for name in COMMANDS:
        path = directory / name
        if path.exists() and not force and MARK not in _head(path):
            raise SystemExit(f"ranch-slurm-shims: error: {path} exists and was not written by "
                             "ranch-slurm-shims; not replacing it (use --force)")
    notes = []
    for name, (ranch, module) in COMMANDS.items():
        path = directory / name
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(shim_text(name, directory, python, root))
        tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        os.replace(tmp, path)
        elsewhere = _which_else(name, directory)
        if elsewhere:
            notes.append(f"note: {elsewhere} exists; the shim shadows it only where {directory} "
                         "comes first in PATH")
        if not os.path.exists(module_path(module)):
            notes.append(f"note: {name} answers with an error for now: {ranch} is not "
                         "available yet")
    return notes


def remove(directory: Path) -> list[str]:
    gone = []
    for name in COMMANDS:
        path = directory / name
        if path.exists() and MARK in _head(path):
            path.unlink()
            gone.append(str(path))
    return gone


def _head(path: Path) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read(400)
    except OSError:
        return ""


def _which_else(name: str, directory: Path) -> str | None:
    parts = [p for p in os.environ.get("PATH", "").split(os.pathsep)
             if p and Path(p).resolve() != directory.resolve()]
    return shutil.which(name, path=os.pathsep.join(parts))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ranch-slurm-shims",
        description="Write wrapper scripts named after Slurm's commands (sbatch, squeue, "
        "scancel, sinfo, scontrol, sacct, srun, salloc) that run Ranch's. Put DIR first on "
        "PATH to use them: export PATH=DIR:$PATH")
    p.add_argument("directory", metavar="DIR", nargs="?")
    p.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    p.add_argument("--force", action="store_true",
                   help="replace files in DIR that ranch-slurm-shims did not write")
    p.add_argument("--remove", action="store_true", help="remove the shims from DIR")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.version:
        from ranch.protocol.release import version_text

        print(version_text())
        return 0
    if args.directory is None:
        p.error("the following arguments are required: DIR")
    directory = Path(args.directory).expanduser().absolute()
    if args.remove:
        for path in remove(directory):
            print(f"removed {path}")
        return 0
    for note in write(directory, force=args.force):
        print(note, file=sys.stderr)
    print(f"Slurm's names now run Ranch's commands from {directory}; to use them:")
    print(f"  export PATH={directory}:$PATH")
    return 0


if __name__ == "__main__":
    sys.exit(main())
