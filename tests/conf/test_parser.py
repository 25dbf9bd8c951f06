"""The grammar: pairs, quoting, comments, escapes, continuation, Include syntax, syntax errors."""

from ranch.conf.parser import Include, parse_text


def pairs_of(text: str) -> list[list[tuple[str, str]]]:
    lines, problems = parse_text(text)
    assert problems == []
    return [[(p.key, p.value) for p in line] for line in lines if not isinstance(line, Include)]


def test_pairs_comments_and_blank_lines() -> None:
    text = "# header\n\nClusterName=x   # trailing\n  NodeName=a CPUs=2\n"
    assert pairs_of(text) == [[("ClusterName", "x")], [("NodeName", "a"), ("CPUs", "2")]]


def test_quoted_values_keep_spaces_and_hashes() -> None:
    assert pairs_of('DownNodes=a Reason="bad fan # 3"\n') == [
        [("DownNodes", "a"), ("Reason", "bad fan # 3")]]


def test_escaped_hash_and_backslash() -> None:
    assert pairs_of("Features=a\\#b,c\\\\d\n") == [[("Features", "a#b,c\\d")]]


def test_continuation_joins_lines_and_keeps_positions() -> None:
    lines, problems = parse_text("NodeName=a \\\n   CPUs=4 \\\n\tWeight=2\nX=1")
    assert problems == []
    node, x = lines
    assert [(p.key, p.value, p.line, p.col) for p in node] == [
        ("NodeName", "a", 1, 1), ("CPUs", "4", 2, 4), ("Weight", "2", 3, 2)]
    assert (x[0].key, x[0].line) == ("X", 4)


def test_even_backslashes_do_not_continue() -> None:
    assert pairs_of("A=x\\\\\nB=y\n") == [[("A", "x\\")], [("B", "y")]]


def test_values_may_contain_equals_and_operators() -> None:
    assert pairs_of("SchedulerParameters=bf_window=4320,max_rpc_cnt=150\nX+=1\n") == [
        [("SchedulerParameters", "bf_window=4320,max_rpc_cnt=150")], [("X", "1")]]


def test_include_lines() -> None:
    lines, problems = parse_text('include a.conf\nINCLUDE "b c.conf"  # x\nInclude=3\n')
    assert problems == []
    assert lines[0] == Include("a.conf", 1, 9)
    assert lines[1] == Include("b c.conf", 2, 10)
    assert [(p.key, p.value) for p in lines[2]] == [("Include", "3")]


def test_value_positions_point_inside_quotes() -> None:
    (line,), _ = parse_text('Reason="x y" A=b\n')
    assert [(p.vline, p.vcol, p.quoted) for p in line] == [(1, 9, True), (1, 16, False)]


def test_every_syntax_error_is_reported_with_position() -> None:
    text = 'A=1\nB 2\nC="open\nD=4\nE=\nF=ok\n'
    lines, problems = parse_text(text)
    assert [(p.line, p.col) for p in problems] == [(2, 3), (3, 3), (5, 3)]
    assert "expected '='" in problems[0].message
    assert "unterminated" in problems[1].message
    assert "missing value" in problems[2].message
    # The good lines around the bad ones are still parsed.
    assert [line[0].key for line in lines] == ["A", "D", "F"]


def test_syntax_error_after_continuation_has_physical_line() -> None:
    _, problems = parse_text("X=1\nNodeName=a \\\n  CPUs 4\n")
    assert [(p.line, p.col) for p in problems] == [(3, 8)]
