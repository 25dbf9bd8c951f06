"""rbatch's and ralloc's --help and --usage: the options Ranch acts on, from their option tables
(cli/sbatch_options.py); loaded only for those."""

from __future__ import annotations

from ranch.cli.sbatch_options import _TABLE, OPTIONAL, RANCH_OPTS, REQUIRED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from ranch.cli.sbatch_options import Options


def help_text(prog: str, options: Options | None = None, head: Iterable[str] = ()) -> str:
    """The help of the options Ranch acts on; `options` and `head` (its first lines): another
    command's (ralloc's)."""
    lines = list(head) or [
        f"Usage: {prog} [OPTIONS...] executable [args...]", "",
        "Options Ranch acts on (every other sbatch 22.05 option is accepted and set aside;",
        "options also come from #SBATCH lines and SBATCH_* variables):"]
    for o in (options.table if options is not None else (*_TABLE, *RANCH_OPTS)):
        if not o.help:
            continue
        short = f"-{o.short}, " if o.short else "    "
        arg = ""
        if o.arg == REQUIRED:
            arg = f"={o.metavar or 'VALUE'}"
        elif o.arg == OPTIONAL:
            arg = f"[={o.metavar or 'VALUE'}]"
        left = f"  {short}--{o.long}{arg}"
        lines.append(f"{left:<36} {o.help}" if len(left) < 36 else f"{left}\n{'':<37}{o.help}")
    return "\n".join(lines) + "\n"


def usage_text(prog: str) -> str:
    return (f"Usage: {prog} [-N nnodes] [-n ntasks] [-c ncpus] [--mem=MB] [-p partition]\n"
            f"       [-t time] [-J jobname] [-o out] [-e err] [-d dependency] [-C list]\n"
            f"       [--export=names] [--signal=[B:]num[@time]] [--wrap=cmd]\n"
            f"       executable [args...]\n")

