"""racct's sacct value checks and filters (cli/sacct_filters.py) on their own: the parsers
ported from Slurm 22.05 and the window cut of -T."""

from __future__ import annotations


def test_sacct_ranges_as_get_resource_arg_range() -> None:
    from ranch.cli.controller import CliError
    from ranch.cli.sacct_filters import INT_MAX, resource_range

    assert resource_range("", "x") == (1, INT_MAX)
    assert resource_range("2", "x") == (2, None)
    assert resource_range("2-4", "x") == (2, 4)
    assert resource_range("1k", "x") == (1024, None)
    for bad in ("x", "a,b", "2-0", "-1", "2-x"):
        try:
            resource_range(bad, "requested node range")
        except CliError as exc:
            assert exc.message == f'Invalid numeric value "{bad}" for requested node range.'
        else:
            raise AssertionError(bad)


def test_sacct_truncate_cuts_times_to_the_window() -> None:
    from ranch.cli.sacct_filters import truncate

    records = [{"start_time": 50.0, "end_time": 250.0}, {"start_time": 120.0, "end_time": None},
               {"start_time": None}]
    truncate(records, 100.0, 200.0)
    assert records == [{"start_time": 100.0, "end_time": 200.0},
                       {"start_time": 120.0, "end_time": None}, {"start_time": None}]
