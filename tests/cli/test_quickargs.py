"""The commands' quick option reader gives argparse's answer, or leaves the line to it."""

from __future__ import annotations

import contextlib
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.cli import quickargs, racct, rcancel, rcontrol, rinfo, rqueue

COMMANDS = [(m.OPTIONS, m.build_parser) for m in (rinfo, rqueue, rcancel, rcontrol, racct)]
WORDS = ["-N", "-l", "-Nl", "-h", "-o", "-o%P %t", "-o=%P", "--format", "--format=%i %T",
         "--form", "-t", "idle", "-i", "2", "-i0", "-i=3", "--iterate=x", "-s", "-v", "-vv",
         "--json", "--json=1", "--server", "127.0.0.1:1", "-u", "alice", "--", "-", "",
         "-x", "--nope", "a=b", "12", "13_2", "show", "node", "-Q", "-Ni5", "-Rs", "-p",
         "main,gpu", "-5", "--me", "-r", "--long", "12.0", "--steps", "--steps=3.1", "-s1.0",
         "-j", "12,13", "-j12", "--jobs=14", "-P", "-o", "JobID,State", "-oJobID",
         "--format=State", "-X", "--uid", "-S", "now", "-n"]


def argparse_answer(build, argv: list[str]) -> dict | None:
    """vars() of argparse's namespace, None when it refuses the line (or prints and exits)."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            return vars(build().parse_args(argv))
        except SystemExit:
            return None


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(COMMANDS), st.lists(st.sampled_from(WORDS), max_size=6))
def test_quick_reader_agrees_with_argparse(command, argv: list[str]) -> None:
    table, build = command
    try:
        got = vars(quickargs.quick(table, argv))
    except quickargs.Declined:
        return
    assert got == argparse_answer(build, argv)


def test_everyday_lines_are_read_without_argparse() -> None:
    for argv in ([], ["-N", "-l"], ["-o", "%P %t"], ["--format=%N"], ["-Nlo%N"], ["-i", "2"]):
        vars(quickargs.quick(rinfo.OPTIONS, argv))  # no Declined
    for argv in ([], ["-u", "alice", "-t", "PD,R"], ["--json"], ["-o%i %T"]):
        vars(quickargs.quick(rqueue.OPTIONS, argv))
    for argv in (["12"], ["-s", "USR1", "12", "13_2"], ["-u", "alice"], ["12", "-Q"]):
        vars(quickargs.quick(rcancel.OPTIONS, argv))
    for argv in (["show", "node", "n1", "-o"], ["-o", "show", "job"], ["ping"]):
        vars(quickargs.quick(rcontrol.OPTIONS, argv))
    # what submitit asks sacct for
    for argv in (["-o", "JobID,State,NodeList", "--parsable2", "-j", "12,13_1"], ["-j", "1"]):
        vars(quickargs.quick(racct.OPTIONS, argv))
