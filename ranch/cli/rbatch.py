"""rbatch: submit a batch script (or --wrap "cmd") to rctld, like sbatch 22.05.

Options come from the command line, from SBATCH_* input variables and from `#SBATCH` /
`#RANCH` lines at the top of the script (read until the first line that is not a comment): the
command line wins over the variables, which win over the script, as with sbatch. The option
table and its reader are cli/sbatch_options.py; what the values mean, cli/sbatch_request.py
(the less common ones, cli/sbatch_values.py).
"""

from __future__ import annotations

import os
import sys
import time

from ranch.cli import sbatch_options as so
from ranch.cli.controller import LAUNCHER_USAGE, CliError, find_target, reason_lines
from ranch.cli.slurm_names import prog, version_text
from ranch.protocol.limits import MAX_FRAME_BYTES, MAX_SCRIPT_BYTES

DIRECTIVES = ("#SBATCH", "#RANCH")
NOT_A_SCRIPT = ("This does not look like a batch script. The first line must start with #! "
                "followed by the path to an interpreter. For instance: #!/bin/sh")
FRAME_HEADROOM = 4096  # the frame's header and the message's own keys, beside the body


def _usage_error(exc: so.OptionError) -> CliError:
    return CliError(f"{exc} (see {prog('rbatch')} --help)", code=LAUNCHER_USAGE)


def read_script(values: dict, rest: list[str]) -> tuple[str, str, list[str]]:
    """(script text, command path as given, its arguments)."""
    wrap = values.get("wrap")
    if wrap is not None:
        if rest:
            raise CliError("give either --wrap or a script, not both")
        return f"#!/bin/sh\n# rbatch --wrap\n{wrap}\n", "", []
    path = rest[0] if rest else None
    if path is not None and path != "-":
        from ranch.cli.sbatch_request import script_path

        path = script_path(path, values.get("chdir"))
    if path is None or path == "-":
        if sys.stdin.isatty():
            raise CliError("no script given: rbatch SCRIPT [ARGS] or rbatch --wrap CMD "
                           "(or the script on stdin)")
        data = sys.stdin.buffer.read(MAX_SCRIPT_BYTES + 1)
        _check_script_size(len(data), 0)
        text, path = data.decode("utf-8", "surrogateescape"), ""
    else:
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_SCRIPT_BYTES + 1)  # a huge file is refused, not read whole
                size = os.fstat(f.fileno()).st_size
        except OSError as exc:
            raise CliError(f"unable to open file {path}: {exc.strerror or exc}") from None
        _check_script_size(len(data), max(size, len(data)))
        text = data.decode("utf-8", "surrogateescape")
    if not text.startswith("#!"):
        raise CliError(NOT_A_SCRIPT)
    if "\0" in text:
        raise CliError("the batch script holds NUL bytes: is it a binary file?")
    if "\r\n" in text:
        from ranch.cli.sbatch_script import check_line_breaks

        check_line_breaks(text, prog("rbatch"))
    return text, path or "", list(rest[1:])  # show job's Command: the path sbatch read


def _check_script_size(read: int, size: int) -> None:
    """Refuse a script over Slurm's max_script_size before anything is sent (`read`: the bytes
    read, at most one past the limit; `size`: the file's size when known, else 0)."""
    if read > MAX_SCRIPT_BYTES:
        what = f"{size:,} bytes" if size else f"more than {MAX_SCRIPT_BYTES:,} bytes"
        raise CliError(f"Batch job submission failed: the batch script is {what}; the limit is "
                       f"{MAX_SCRIPT_BYTES:,} (Slurm's max_script_size)")


def _check_request_size(body: dict) -> None:
    """Refuse a submission whose frame rctld would refuse (the environment counts too)."""
    from ranch.protocol.cjson import dumps

    size = len(dumps(body))
    if size + FRAME_HEADROOM > MAX_FRAME_BYTES:
        env = len(dumps(body.get("env", ())))
        script = len(dumps(body.get("script", "")))
        raise CliError(f"Batch job submission failed: the request is {size:,} bytes (script "
                       f"{script:,}, environment {env:,}, JSON-escaped); the limit is "
                       f"{MAX_FRAME_BYTES - FRAME_HEADROOM:,}")


def script_values(script: str) -> dict[str, object]:
    """The options of the script's #SBATCH/#RANCH lines (a later line wins), then those its
    #PBS lines stand for, which win over them (sbatch reads #PBS lines second)."""
    values: dict[str, object] = {}
    try:
        # a script without directives loads nothing more (rbatch's import budget)
        lines = [] if not any(tag in script for tag in DIRECTIVES) else _directives(script)
        for line, words in lines:
            found, _ = so.parse(words, where=f" (script line {line})", positional=False)
            for key in found:
                if key in so.COMMAND_LINE_ONLY:
                    raise so.OptionError(f"--{key} is not allowed in a batch script (script "
                                         f"line {line})")
            values.update(found)
        if "#PBS" in script:
            from ranch.cli.sbatch_script import pbs_words

            found, _ = so.parse(pbs_words(script), where=" (#PBS line)", positional=False)
            values.update(found)
    except so.OptionError as exc:
        raise _usage_error(exc) from None
    return values


def _directives(script: str) -> list[tuple[int, list[str]]]:
    from ranch.cli.sbatch_script import directive_words

    return directive_words(script, DIRECTIVES)


def gather(argv: list[str], environ: dict[str, str]) -> tuple[dict, dict, list[str], str, str]:
    """(every option value, those given as words: the command line's and the script's, as
    sbatch counts them; script args, script text, command path)."""
    try:
        cli, rest = so.parse(argv)
    except so.OptionError as exc:
        raise _usage_error(exc) from None
    name = prog("rbatch")
    if cli.get("help"):
        from ranch.cli.sbatch_help import help_text

        sys.stdout.write(help_text(name))
        raise SystemExit(0)
    if cli.get("usage"):
        from ranch.cli.sbatch_help import usage_text

        sys.stdout.write(usage_text(name))
        raise SystemExit(0)
    if cli.get("version"):
        print(version_text("rbatch"))
        raise SystemExit(0)
    from ranch.cli.sbatch_request import check_words

    so.check_ints(cli)
    check_words(cli)  # slurm_opt.c's refusals come before the script is looked for
    script, command, script_args = read_script(cli, rest)
    from ranch.cli.sbatch_env import from_environment  # (sbatch_request's too: no extra load)

    try:
        from_env = from_environment(environ)
    except so.OptionError as exc:
        raise _usage_error(exc) from None
    in_script = script_values(script)
    values = {**in_script, **from_env, **cli}
    return values, {**in_script, **cli}, script_args, script, command


def run(argv: list[str]) -> int:
    from ranch.cli import sbatch_request
    from ranch.cli.job_requests import Refused, request

    environ = dict(os.environ)
    values, words, script_args, script, command = gather(argv, environ)
    so.check_ints(values)  # parse_int's refusals come first, as sbatch reads its options
    sbatch_request.memory_choice(values, words)
    body = sbatch_request.body(values, script, command, script_args, environ)
    _check_request_size(body)
    target = find_target(words.get("server"), words.get("key-file"), words.get("conf"))
    try:
        reply = request(target, "SubmitJob", body, want="SubmitReply")
    except Refused as exc:
        where = f" ({exc.field})" if exc.field else ""
        exc.message = reason_lines(prog("rbatch"), exc.message)
        if exc.field == "array":  # slurmctld's words for every --array it refuses
            from ranch.cli.sbatch_script import INVALID_ARRAY

            raise CliError(INVALID_ARRAY) from None
        if body["test_only"]:  # slurm_perror's line: no "sbatch: error: " before it
            print(f"allocation failure: {exc.message}{where}", file=sys.stderr)
            return 1
        raise CliError(f"Batch job submission failed: {exc.message}{where}") from None
    job_id = reply.get("job_id")
    if body["test_only"]:
        from ranch.conf.timefmt import slurm_timestamp

        when = slurm_timestamp(reply.get("start_time") or 0)
        print(f"{prog('rbatch')}: Job {job_id} to start at {when} using {reply.get('cpus')} "
              f"processors on nodes {reply.get('nodes')} in partition {reply.get('partition')}",
              file=sys.stderr)
        return 0
    if not values.get("quiet"):
        print(job_id if values.get("parsable") else f"Submitted batch job {job_id}", flush=True)
    if values.get("wait"):
        return wait_for(target, int(reply["job_id"]))
    return 0


def wait_for(target, job_id: int) -> int:
    """sbatch --wait: poll until every job of the submission ended; the highest exit code."""
    from ranch.cli.job_requests import fetch_jobs
    from ranch.statemachine.finalstates import FINAL_STATES

    pause = 0.5
    while True:
        time.sleep(pause)
        pause = min(pause * 2, 10.0)
        _, jobs = fetch_jobs(target, (job_id,))
        mine = [j for j in jobs if j["job_id"] == job_id or j.get("array_job_id") == job_id]
        if not mine:
            print(f"{prog('rbatch')}: error: Job {job_id} no longer found and exit code not "
                  "found", file=sys.stderr)
            return 0
        if all(j["state"] in FINAL_STATES for j in mine):
            return max((j.get("exit_code") or 0) if not j.get("signal") else 1 for j in mine)


def main(argv: list[str] | None = None) -> int:
    from ranch.cli.controller import run_main

    return run_main("rbatch", run, argv)


if __name__ == "__main__":
    sys.exit(main())
