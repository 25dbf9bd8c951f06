"""Runs the value matrix's cases on Ranch inside one Python process: each case is Ranch's command
under Slurm's name (cli/slurm_names.py's main, what the shims exec), with its stdout and stderr
caught and its exit status kept, so thousands of cases cost a request each, not a Python start.

    python -m tests.conformance.value_worker CASES.json RESULTS.json

CASES.json is a list of argv lists; RESULTS.json gets [rc, stdout, stderr] for each, in order.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys


def run_one(argv: list[str]) -> tuple[int, str, str]:
    from ranch.cli import slurm_names

    out, err = io.StringIO(), io.StringIO()
    slurm_names.activate(None)  # type: ignore[arg-type]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = slurm_names.main(argv)
            except SystemExit as exc:
                code = exc.code
                rc = code if isinstance(code, int) else (0 if code is None else 1)
                if not isinstance(code, int) and code is not None:
                    print(code, file=sys.stderr)
    except Exception as exc:  # a command that crashes is a finding, not the matrix's end
        err.write(f"CRASH {type(exc).__name__}: {exc}\n")
        rc = 99
    return (rc or 0) & 0xFF, out.getvalue(), err.getvalue()


def main() -> None:
    cases = json.loads(open(sys.argv[1]).read())
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)  # nothing a case reads comes from the caller
    results = [run_one(list(argv)) for argv in cases]
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
