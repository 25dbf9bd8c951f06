"""sbatch --export: which of the submitter's environment variables the job gets, as sbatch
22.05 builds the job's environment (src/sbatch/sbatch.c, env_merge_filter in src/common/env.c).

ALL (the default): everything. NONE: only the SLURM* variables. A list: its NAME (the caller's
value) and NAME=value entries (a NONE among them adds nothing), in order (a later entry
overwrites an earlier one, `ALL` among them loads everything at that point), then every SLURM_*
variable of the caller on top.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping



def quote_tokens(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside quotes; a token wholly in quotes loses them (find_quote_token)."""
    out: list[str] = []
    start, single, double = 0, False, False
    for i, ch in enumerate(text + sep):
        if ch == "'" and not double:
            single = not single
        elif ch == '"' and not single:
            double = not double
        elif ch == sep and not single and not double:
            tok = text[start:i]
            if len(tok) >= 2 and tok[0] == tok[-1] and tok[0] in "'\"":
                tok = tok[1:-1]
            out.append(tok)
            start = i + 1
    return [t for t in out if t]


def exported(export: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The job's environment for `--export=export` (None: not given, i.e. ALL)."""
    if export is None or export.strip().upper() == "ALL":
        return dict(environ)
    if export.strip().upper() == "NONE":
        return {k: v for k, v in environ.items() if k.startswith("SLURM")}
    env: dict[str, str] = {}
    for tok in quote_tokens(export):
        if tok.upper() == "ALL":
            env.update(environ)
        elif tok.upper() == "NONE":  # NONE,FOO=z: FOO alone (sbatch 22.05 takes it so)
            continue
        elif "=" in tok:
            name, _, value = tok.partition("=")
            env[name] = value
        elif tok in environ:
            env[tok] = environ[tok]
    env.update((k, v) for k, v in environ.items() if k.startswith("SLURM_"))
    return env


def check(export: str) -> str | None:
    """Why sbatch would refuse this --export value, or None."""
    toks = quote_tokens(export)
    if not export:  # sbatch takes --export= as a list of no names: SLURM_* alone
        return None
    if not toks:
        return "--export: expected ALL, NONE or a list of NAME[=value]"
    for t in toks:
        name = t.partition("=")[0]
        if not name or "\0" in t:
            return f"--export: bad entry {t!r}: expected NAME or NAME=value"
    return None
