"""squeue's command line as its getopt_long reads it (cli/squeue_options.py): glibc's rules for
long names, optional arguments and permuted words, and the checks of opts.c and sort.c. The
value matrix holds the same reader to the real squeue; these pin the corners it has one case of."""

from __future__ import annotations

import pytest

from ranch.cli.squeue_options import Refused, read, sort_keys


def refused(argv: list[str]) -> list[str]:
    with pytest.raises(Refused) as caught:
        read(argv)
    return caught.value.lines


def test_optional_arguments_attach_only_with_equals_and_take_the_first_loose_word() -> None:
    assert read(["-j"]).jobs is None and read(["-j"]).job_flag
    assert read(["--jobs", "5"]).jobs == read(["5", "--jobs"]).jobs == read(["-j5"]).jobs == "5"
    assert read(["-s", "12.0"]).steps == "12.0" and read(["-s"]).steps == ""
    assert read(["-s", "-j", "12"]).steps == "" and read(["-s", "-j", "12"]).jobs == "12"
    assert refused(["-j", "5", "6"]) == ["squeue: error: Unrecognized option: 6"]
    assert refused(["--", "-h"]) == ["squeue: error: Unrecognized option: -h"]


def test_long_names_by_prefix_where_every_match_is_the_same_option() -> None:
    assert read(["--node=c1"]).nodelist == read(["--nodel", "c1"]).nodelist == "c1"
    assert read(["--use=x"]).user == "x"  # --user and --users: one option
    assert read(["--acc=a"]).account == read(["-Ua"]).account == "a"  # -U: -A of old
    assert refused(["--us=x"])[0] == ("squeue: option '--us=x' is ambiguous; possibilities: "
                                      "'--usage' '--user' '--users'")
    assert refused(["--long=1"])[0] == "squeue: option '--long' doesn't allow an argument"
    assert refused(["--name"])[0] == "squeue: option '--name' requires an argument"
    assert refused(["-Z"])[0] == "squeue: invalid option -- 'Z'"
    flags = read(["-hlv", "-v", "--me", "--hide", "-a"])
    assert (flags.noheader, flags.long, flags.verbose, flags.me) == (True, True, 2, True)
    assert read(["-a", "--hide"]).all is False and read(["--hide", "-a"]).all is True


def test_values_opts_c_checks() -> None:
    assert read(["-j", "12_3,5x"]).jobs == "12_3,5x"  # strtol: what follows the number is left
    assert refused(["-j", "0"]) == ["squeue: error: Invalid job id: 0"]
    assert refused(["--steps=12"]) == ["squeue: error: Invalid job_step id: 12.??"]
    assert refused(["--steps=12.-1"]) == ["squeue: error: Invalid job_step id: 12.-1"]
    assert refused(["-i", "0"]) == ["squeue: error: --iterate=0"]
    assert read(["-i", "2s"]).iterate == 2  # atoi
    assert "incompatible" in refused(["-o", "%i", "-O", "jobid"])[0]
    assert "mutually exclusive" in refused(["-l", "-o", "%i"])[0]


def test_sort_keys_as_sort_c_reads_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert sort_keys("P,t,-p", "squeue") == [("p", True), ("t", False), ("P", False)]
    assert sort_keys("-cluster,i", "squeue") == [("i", False), ("cluster", True)]
    assert sort_keys("c,b,i", "squeue") == [("i", False)]  # c taken and ignored, b said
    assert capsys.readouterr().err == "squeue: Invalid sort specification: b\n"
    with pytest.raises(Refused) as caught:
        sort_keys("main", "squeue")  # read from the end: n ignored, i kept, a refused
    assert caught.value.lines == ["squeue: error: Invalid sort specification: a"]
