"""How errors read: PATH:LINE:COL: message, the source line, a caret under the spot."""

from ranch.conf.errors import ConfDiagnostic, ConfigError

from .helpers import errors_of


def test_format_renders_line_and_caret() -> None:
    d = ConfDiagnostic("site.conf", 3, 12, "CPUs: 'x' is not a whole number", "NodeName=a CPUs=x")
    assert d.format() == (
        "site.conf:3:12: CPUs: 'x' is not a whole number\n"
        "    NodeName=a CPUs=x\n"
        "               ^")


def test_caret_follows_tabs() -> None:
    d = ConfDiagnostic("f", 1, 3, "m", "\tA=b")
    assert d.format().splitlines()[2] == "    \t ^"


def test_warning_and_whole_file_forms() -> None:
    assert ConfDiagnostic("f", 1, 1, "m", "x", "warning").format().startswith("f:1:1: warning: m")
    assert ConfDiagnostic("f", 0, 0, "cannot read").format() == "f: cannot read"


def test_config_error_message_is_all_diagnostics() -> None:
    errs = errors_of("NodeName=a CPUs=x\nPartitionName=p Nodes=zz\n", path="c.conf")
    assert [(e.path, e.line, e.col) for e in errs] == [("c.conf", 1, 17), ("c.conf", 2, 23)]
    err = ConfigError(errs)
    assert str(err) == "\n".join(e.format() for e in errs)
    assert str(err).splitlines()[:3] == [
        "c.conf:1:17: CPUs: 'x' is not a whole number",
        "    NodeName=a CPUs=x",
        "                    ^"]


def test_hostlist_error_caret_inside_value() -> None:
    (e,) = errors_of("NodeName=ok\nPartitionName=p Nodes=ok,bad[1-x]\n")
    caret_line = e.format().splitlines()[2]
    # The caret sits within 'bad[1-x]', not at the value's first character.
    col = caret_line.index("^") - 4 + 1
    assert col == e.col and e.col > len("PartitionName=p Nodes=ok,")
    assert e.source_line[e.col - 1] in "1-x]"


def test_syntax_and_semantic_errors_together() -> None:
    errs = errors_of('A=1\nNodeName=a "oops"\nNodeName=b CPUs=no\n')
    assert [(e.line, e.col) for e in errs] == [(2, 12), (3, 17)]
