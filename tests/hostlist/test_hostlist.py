"""Unit and property tests for ranch.conf.hostlist (Slurm hostlist expressions)."""

from __future__ import annotations

from functools import cmp_to_key

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.conf.hostlist import MAX_RANGE, HostlistError, expand, fold, natural_cmp


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("alpha", ["alpha"]),
        ("alpha,beta", ["alpha", "beta"]),
        ("node[01-04,07]", ["node01", "node02", "node03", "node04", "node07"]),
        ("lx[15,18,32-33]", ["lx15", "lx18", "lx32", "lx33"]),
        ("n[8-10]", ["n8", "n9", "n10"]),  # no padding written in the low bound
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("n[007]", ["n007"]),
        ("n[1-2]-ib", ["n1-ib", "n2-ib"]),
        ("[1-3]", ["1", "2", "3"]),
        ("a,n[1-2],b", ["a", "n1", "n2", "b"]),  # commas inside brackets do not split
        ("n[2,1-2],n1", ["n2", "n1", "n2", "n1"]),  # written order, duplicates kept
        ("ALL", ["ALL"]),  # callers handle ALL
    ],
)
def test_expand(expr: str, names: list[str]) -> None:
    assert expand(expr) == names


def test_expand_padding_by_low_bound_width() -> None:
    assert expand("n[01-10]") == [f"n{i:02d}" for i in range(1, 11)]
    assert expand("n[1-010]") == [f"n{i}" for i in range(1, 11)]


def test_expand_several_groups_is_cartesian_product() -> None:
    assert expand("rack[0-1]_blade[0-2]") == [
        f"rack{r}_blade{b}" for r in range(2) for b in range(3)
    ]
    assert len(expand("rack[0-63]_blade[0-41]")) == 64 * 42


def test_expand_biggest_range_allowed() -> None:
    names = expand(f"n[1-{MAX_RANGE}]")
    assert len(names) == MAX_RANGE and names[-1] == f"n{MAX_RANGE}"


@pytest.mark.parametrize(
    ("expr", "col", "words"),
    [
        ("n[3-1]", 2, "low bound above"),
        ("n[1,5-2]", 4, "low bound above"),
        ("n[-1]", 2, "negative"),
        ("n[1--2]", 4, "negative"),
        ("n[a-b]", 2, "not a number"),
        ("n[1x]", 3, "not a number"),
        ("n[1-2-3]", 5, "not a number"),
        ("n[1-]", 3, "no high bound"),
        ("n[1-2", 1, "never closed"),
        ("a,n[1-2", 3, "never closed"),
        ("n1-2]", 4, "without a matching"),
        ("n[[1]]", 2, "inside"),
        ("a,,b", 2, "empty host name"),
        (",a", 0, "empty host name"),
        ("a,", 2, "empty host name"),
        ("", 0, "empty hostlist"),
        ("n[]", 2, "empty number"),
        ("n[1,,2]", 4, "empty number"),
        ("n[0-65536]", 2, "65,536"),
        ("ab,n[5,1-70000]", 7, "65,536"),
        ("n 1", 1, "whitespace"),
        ("a[0-65535]b[0-65535]", 0, "more than"),
    ],
)
def test_expand_errors_name_the_column(expr: str, col: int, words: str) -> None:
    with pytest.raises(HostlistError) as info:
        expand(expr)
    assert info.value.col == col
    assert words in info.value.message
    assert isinstance(info.value, ValueError)
    assert expr in str(info.value) or not expr


# Each as `scontrol show hostlistsorted` (Slurm 22.05.8) writes it; tests/conformance checks
# random sets against scontrol itself.
@pytest.mark.parametrize(
    ("names", "folded"),
    [
        (["gpu01", "gpu02", "gpu03", "cpu1"], "cpu1,gpu[01-03]"),
        (["n001", "n002"], "n[001-002]"),  # two names fold as Slurm folds them
        (["n1", "n2"], "n[1-2]"),
        (["n9", "n10"], "n[9-10]"),  # unpadded numbers share a width
        (["n9", "n10", "n11"], "n[9-11]"),
        (["n09", "n10", "n11"], "n[09-11]"),
        (["n8", "n09", "n10"], "n[8,09-10]"),  # n[8-10] would expand to n9, not n09
        (["n1", "n01", "n001"], "n[1,01,001]"),  # same value, different names
        (["n9", "n05", "n10"], "n[9,05,10]"),  # a padded number between by its width
        (["n05", "n9", "n10"], "n[9-10,05]"),  # ... unless the names came joined
        (["n3", "n1", "n2", "n1"], "n[1-3]"),  # sorted folding is a set
        (["n1-ib", "n2-ib", "n3-ib"], "n1-ib,n2-ib,n3-ib"),  # only a trailing number folds
        ([f"rack{r}_blade{b}" for r in range(2) for b in range(3)],
         "rack0_blade[0-2],rack1_blade[0-2]"),
        (["rack10-n1", "rack9-n1", "rack010-n1"], "rack010-n1,rack9-n1,rack10-n1"),  # natural
        (["b1", "a1", "a", "c"], "a,a1,b1,c"),
        (["n10", "n9", "n100"], "n[9-10,100]"),
        (["beta", "alpha"], "alpha,beta"),
        (["12", "11"], "[11-12]"),
        ([], ""),
    ],
)
def test_fold(names: list[str], folded: str) -> None:
    assert fold(names) == folded
    assert sorted(expand(folded)) == sorted(set(names)) if names else folded == ""


def test_fold_never_writes_a_range_expand_refuses() -> None:
    names = [f"n{i:06d}" for i in range(1, 100_001)]
    folded = fold(reversed(names))
    assert folded == "n[000001-065536,065537-100000]"
    assert expand(folded) == names


def test_fold_unsorted_keeps_order_and_duplicates_like_scontrol() -> None:
    assert fold(["tux2", "tux1", "tux2"], sort=False) == "tux[2,1-2]"
    assert fold(["n1", "gpu1", "n2", "n3", "n4"], sort=False) == "n1,gpu1,n[2-4]"
    assert fold(["n001", "n002"], sort=False) == "n[001-002]"
    assert fold(["n10", "n9", "n05"], sort=False) == "n[10,9,05]"


@pytest.mark.parametrize(("a", "b", "sign"), [
    ("rack9", "rack10", -1), ("rack010", "rack9", -1), ("a1", "a01", 1), ("n", "n1", -1),
    ("a b", "ab", 0), ("x2y", "x2y", 0), ("x12", "x2", 1), ("gpu", "cpu", 1)])
def test_natural_order_is_strnatcmp(a: str, b: str, sign: int) -> None:
    assert natural_cmp(a, b) == sign and natural_cmp(b, a) == -sign


@pytest.mark.parametrize(("name", "col"), [("a[1", 1), ("a,b", 1), ("a b", 1), ("", 0)])
def test_fold_rejects_names_it_cannot_write(name: str, col: int) -> None:
    with pytest.raises(HostlistError) as info:
        fold(["ok1", name])
    assert info.value.col == col


_piece = st.sampled_from(["n", "gpu", "rack", "_blade", "-ib", "a.b", "x"])
_number = st.integers(0, 120).flatmap(
    lambda v: st.sampled_from([str(v), str(v).zfill(2), str(v).zfill(3)])
)
_name = st.one_of(
    st.sampled_from(["login", "alpha", "beta"]),
    st.tuples(_piece, _number).map("".join),
    st.tuples(_piece, _number, _piece).map("".join),
    st.tuples(_piece, _number, _piece, _number).map("".join),
    st.tuples(_number, _piece).map("".join),
    _number,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_name, max_size=60))
def test_fold_expands_back_to_the_sorted_names(names: list[str]) -> None:
    folded = fold(names)
    if not names:
        assert folded == ""
        return
    back = expand(folded)
    assert sorted(back) == sorted(set(names)) and len(back) == len(set(names))
    # in Slurm's order: natural order of the prefixes, each one's names together
    prefixes = [n.rstrip("0123456789") for n in back]
    firsts = list(dict.fromkeys(prefixes))
    assert prefixes == sorted(prefixes, key=firsts.index)
    assert firsts == sorted(firsts, key=cmp_to_key(natural_cmp))
    assert fold(back) == folded  # the same names in Slurm's order fold the same


@settings(max_examples=200, deadline=None)
@given(st.lists(_name, max_size=60))
def test_unsorted_fold_expands_back_to_the_same_list(names: list[str]) -> None:
    folded = fold(names, sort=False)
    assert expand(folded) == names if names else folded == ""


@settings(max_examples=200, deadline=None)
@given(_name)
def test_one_name_folds_to_itself_as_the_full_way_writes_it(name: str) -> None:
    # fold's shortcut for one name against its whole way (the pair is one name after it)
    assert fold([name]) == fold([name, name])
    assert fold([name]) == name and fold([name], sort=False) == name


# The checks that spare commands `import re` say what the regular expressions said.
_TEXT = st.text(alphabet=st.sampled_from("ab01[],- \t\u00a0\u2003\n\x00"), max_size=12)


@given(_TEXT)
def test_plain_checks_agree_with_the_regular_expressions(text: str) -> None:
    import re

    from ranch.conf import hostlist

    special = re.compile(r"[\[\],\s]")
    plain = re.compile(r"[^\[\]\s,]+(?:,[^\[\]\s,]+)*")
    assert hostlist._no_special(text) is (special.search(text) is None)
    assert hostlist.plain_list(text) is (plain.fullmatch(text) is not None)


def test_plain_names_fold_and_expand_without_re() -> None:
    import subprocess
    import sys
    from pathlib import Path

    code = """
import sys
from ranch.conf.hostlist import expand, fold
assert fold(["n3", "n1", "n2", "gpu01", "login"]) == "gpu01,login,n[1-3]"
assert expand("n1,n2,gpu01") == ["n1", "n2", "gpu01"]
print("re" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2], check=True)
    assert out.stdout.strip() == "False", out.stderr
