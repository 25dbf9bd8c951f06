"""SchedulerParameters' backfill flag words (issue 44): bf_busy_nodes and bf_continue are read
as present or not; one given a value is an error at its place, as a bad bf_* number is."""

from __future__ import annotations

import pytest

from ranch.conf.build import parse_config_text
from ranch.conf.errors import ConfigError

BASE = "NodeName=n1\nPartitionName=a Nodes=n1 Default=YES\n"


def test_flag_words_are_read() -> None:
    s = parse_config_text("SchedulerParameters=bf_window=60,bf_busy_nodes,bf_continue\n"
                          + BASE).scheduler
    assert (s.bf_window, s.bf_busy_nodes, s.bf_continue) == (60, True, True)
    s = parse_config_text(BASE).scheduler
    assert (s.bf_busy_nodes, s.bf_continue) == (False, False)


@pytest.mark.parametrize(("line", "col", "said"), [
    ("SchedulerParameters=bf_busy_nodes=1", 21, "bf_busy_nodes takes no value"),
    ("SchedulerParameters=bf_window=60,bf_continue=yes", 34, "bf_continue takes no value"),
    ("SchedulerParameters=bf_continue,bf_resolution=0", 33, "bf_resolution: "),
])
def test_a_bad_word_names_its_place(line: str, col: int, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config_text(line + "\n" + BASE, path="c.conf")
    first = err.value.errors[0]
    assert (first.path, first.line, first.col) == ("c.conf", 1, col) and said in first.message, \
        first
