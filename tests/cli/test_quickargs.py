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


def test_getopt_reads_as_getopt_long() -> None:
    """quickargs.getopt (racct's reading of sacct's line): a required argument is the next word
    whatever it starts with, a long name may be any unique prefix of sacct's (Ranch's own only
    in full), words that are no option are gathered from anywhere, and glibc's refusals."""
    def read(*argv: str):
        args, words = quickargs.getopt(racct.OPTIONS, list(argv), exact=racct.OWN)
        return args, words

    args, words = read("-c", "-A", "-j", "999")
    assert args.accounts == "-j" and args.jobs == [] and words == ["999"]
    args, words = read("12", "--con=x", "-vv", "-oJobID", "--fields", "State", "--", "-X")
    assert args.constraints == "x" and args.verbose == 2 and args.format == ["JobID", "State"]
    assert words == ["12", "-X"] and args.allocations is False
    args, _ = read("--whole-hetjob")
    assert args.whole_hetjob == "yes"
    for argv, message in ((["--ser=h:1"], "unrecognized option '--ser'"),
                          (["--allusers=1"], "option '--allusers' doesn't allow an argument"),
                          (["-Z"], "invalid option -- 'Z'"),
                          (["-A"], "option requires an argument -- 'A'"),
                          (["--time"], "option '--time' is ambiguous; possibilities: "
                                       "'--timelimit-min' '--timelimit-max'")):
        try:
            read(*argv)
        except quickargs.GetoptError as exc:
            assert str(exc) == message
        else:
            raise AssertionError(f"{argv} was read")
    assert read("--server", "h:1")[0].server == "h:1"

