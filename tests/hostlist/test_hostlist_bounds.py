"""Hostlist bounds (issue 18): refused before any name is built, with the limit named, and the
fast parser agreeing with the careful one on what it accepts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.conf.hostlist import MAX_EXPR_CHARS, MAX_HOSTS, HostlistError, count, expand


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        (",".join(f"n{i}[0-65535]" for i in range(16)), "more than 131,072 hosts"),  # 1,048,576
        ("a[0-65535]b[0-65535]", "more than 131,072 hosts"),
        ("a[0-65535]b[0-65535]c[0-65535]d[0-65535]", "more than 131,072 hosts"),
        (",".join(["a"] * (MAX_HOSTS + 1)), "more than 131,072 hosts"),
        ("n[" + ",".join(map(str, range(MAX_HOSTS + 1))) + "]", "more than 131,072 hosts"),
        ("n[1-2]" + "x" * MAX_EXPR_CHARS, "at most 524,288 are allowed"),
        ("n[0-70000]", "at most 65,536"),
    ],
)
def test_oversized_expressions_are_refused_naming_the_limit(expr: str, words: str) -> None:
    for fn in (expand, count):
        with pytest.raises(HostlistError) as info:
            fn(expr)
        assert words in str(info.value)
        assert len(str(info.value)) < 400  # the expression is cut short in the message


def test_the_biggest_expansions_allowed() -> None:
    expr = "n[000001-065536],m[000001-065536]"
    assert count(expr) == MAX_HOSTS == len(expand(expr))
    plain = ",".join(f"h{i}" for i in range(MAX_HOSTS))
    assert count(plain) == MAX_HOSTS and expand(plain)[-1] == f"h{MAX_HOSTS - 1}"
    long_names = ",".join(f"host-with-a-long-name-{i:07d}" for i in range(30_000))
    assert len(long_names) > MAX_EXPR_CHARS and len(expand(long_names)) == 30_000


_part = st.one_of(
    st.sampled_from(["n", "gpu", "a-b", "x_", "", "[", "]", ",", " ", "-"]),
    st.builds(lambda lo, n, pad: f"[{lo:0{pad}d}-{lo + n:0{pad}d}]",
              st.integers(0, 50), st.integers(0, 5), st.integers(1, 3)),
    st.builds(lambda a, b: f"[{a},{b}]", st.integers(0, 99), st.integers(0, 99)),
    st.integers(0, 999).map(str),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_part, max_size=8).map("".join))
def test_count_matches_expand_or_both_refuse(expr: str) -> None:
    try:
        names = expand(expr)
    except HostlistError as exc:
        with pytest.raises(HostlistError) as again:
            count(expr)
        assert (again.value.col, again.value.message) == (exc.col, exc.message)
        return
    assert count(expr) == len(names)
