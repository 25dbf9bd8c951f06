"""ranch.conf.client (the commands' reader) and ranch.conf.build (the full parser) agree on
generated files.

Both read the same files on disk, Includes and all: the controllers in order, the port, the key
file, AuthType, MUNGE's socket and SrunPortRange when the file is good; the same file:line for
the first error when it is not. The generator writes what an admin may: any key case, blanks
and tabs around `=`, quoted and escaped values, backslash continuations, comments, CRLF,
Include chains (with cycles and missing files), node lines carrying keys that only count on
global lines, and now and then a broken line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ranch.conf.build import load_config
from ranch.conf.client import ClientConfError, read
from ranch.conf.errors import ConfigError

_word = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)
_host = st.one_of(_word, st.builds(lambda a, b: f"{a}({b})", _word, _word),
                  st.builds(lambda a, b: f"{a}(10.0.0.{b})", _word, st.integers(0, 255)),
                  st.sampled_from(["a(b", "(x)", "a(b)c", "a()"]))  # the last four: refused
_port = st.one_of(st.integers(1, 65535).map(str), st.sampled_from(
    ["6817-6820", "+7000", " 6818", "0", "65536", "x1", "-5", "٦٨١٧"]))
_path = st.builds(lambda d, f, h: f"{d}{f}{'#x' if h else ''}",
                  st.sampled_from(["", "keys/", "/etc/ranch/", "../", "./"]), _word,
                  st.booleans())
_auth_info = st.builds(lambda s, t: ",".join(x for x in (s, t) if x),
                       st.sampled_from(["", "socket=munge.sock", "socket=/run/m.sock",
                                        " Socket = /s ", "socket="]),
                       st.sampled_from(["", "ttl=60"]))
_setting = st.one_of(
    st.tuples(st.just("SlurmctldHost"), _host),
    st.tuples(st.sampled_from(["ControlMachine", "BackupController", "ControlAddr",
                               "BackupAddr"]), _word),
    st.tuples(st.just("SlurmctldPort"), _port),
    st.tuples(st.just("AuthKeyFile"), st.one_of(_path, st.just(""))),
    st.tuples(st.just("AuthType"), st.sampled_from(["auth/munge", "AUTH/MUNGE", "auth/none"])),
    st.tuples(st.just("AuthInfo"), _auth_info),
    st.tuples(st.just("ClusterName"), _word),
    st.tuples(st.just("SrunPortRange"), st.sampled_from(
        ["60001-63000", " 5000 - 5010 ", "7000-7000", "63000-60001", "x-1", "70000", "0-5"])),
    st.tuples(st.sampled_from(["SlurmdTimeout", "MessageTimeout"]), st.just("30")),
    st.tuples(st.just("Frobnicate"), _word),  # unknown: a warning, nothing else
)
_case = st.sampled_from([str, str.lower, str.upper, str.swapcase])
_gap = st.sampled_from(["", " ", "\t", " \\\n ", "\\\n"])
_between = st.sampled_from([" ", "\t  ", " \\\n", " \\\r\n\t", "\\\n"])
_broken = st.sampled_from(["Key Value", "=x", "Key=", 'Key="open', "a:b=1", "Include",
                           'Include "x', "Key=a \v", "SlurmctldPort", "A=1 include x"])


def _value(text: str, quoted: bool) -> str:
    if quoted or not text:
        return f'"{text}"'
    return text.replace("\\", "\\\\").replace("#", "\\#")


@st.composite
def _pair(draw) -> str:
    key, value = draw(_setting)
    quoted = draw(st.booleans()) and '"' not in value
    if not quoted and (" " in value or not value):
        quoted = True
    return (f"{draw(_case)(key)}{draw(_gap)}{draw(st.sampled_from(['=', '+=']))}"
            f"{draw(_gap)}{_value(value, quoted)}")


@st.composite
def _file(draw, index: int, count: int) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["global"] * 5 + ["node", "include", "blank", "comment",
                                                      "broken"]))
        if kind == "global":
            pairs = draw(st.lists(_pair(), min_size=1, max_size=3))
            line = pairs[0] + "".join(draw(_between) + p for p in pairs[1:])
        elif kind == "node":  # settings on a node line are not the controller's
            line = f"{draw(_case)('NodeName')}=f{index}x{len(lines)} CPUs=1 {draw(_pair())}"
        elif kind == "include":
            target = draw(st.integers(0, count))  # == count: a file that does not exist
            name = f"f{target}.conf"
            form = draw(st.sampled_from([name, f"./{name}", f'"{name}"', "f*.conf",
                                         f"@ROOT@/{name}"]))  # @ROOT@: the folder, absolute
            blank = draw(st.sampled_from([" ", "\t "]))
            line = f"{draw(_case)('Include')}{blank}{form}"
        elif kind == "blank":
            line = draw(st.sampled_from(["", "   ", "\t"]))
        elif kind == "comment":
            line = draw(st.sampled_from(["# a comment", "  #SlurmctldPort=1", "#"]))
        else:
            line = draw(_broken)
        if kind != "comment" and draw(st.booleans()):
            line += draw(st.sampled_from([" # note", "\t#x=1", "#"]))
        lines.append(line)
    return lines


@st.composite
def _tree(draw) -> list[list[str]]:
    count = draw(st.integers(1, 3))
    return [draw(_file(i, count)) for i in range(count)]


def _write(root: Path, tree: list[list[str]], crlf: bool, final_newline: bool) -> Path:
    (root / "keys").mkdir(exist_ok=True)
    for i, lines in enumerate(tree):
        eol = "\r\n" if crlf else "\n"
        text = eol.join(lines).replace("@ROOT@", str(root))
        (root / f"f{i}.conf").write_text(text + (eol if final_newline else ""))
    return root / "f0.conf"


def full(path: Path) -> tuple:
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        first = exc.errors[0]
        return ("error", f"{first.path}:{first.line}" if first.line else first.path)
    return (tuple((h.name, h.addr) for h in cfg.control.hosts), cfg.control.port,
            cfg.auth.key_file, cfg.access.auth_type, cfg.access.munge_socket,
            cfg.control.srun_port_range)


def quick(path: Path) -> tuple:
    try:
        got = read(str(path))
    except ClientConfError as exc:
        return ("error", exc.where)
    return got.hosts, got.port, got.key_file, got.auth_type, got.munge_socket, got.srun_ports


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tree(), st.booleans(), st.booleans(), st.booleans())
def test_both_readers_agree(tree: list[list[str]], crlf: bool, final_newline: bool,
                            relative: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        main = _write(Path(tmp), tree, crlf, final_newline)
        here = os.getcwd()
        try:
            if relative:  # the name a command is given, and the one its errors say
                os.chdir(tmp)
                main = Path("f0.conf")
            assert quick(main) == full(main)
        finally:
            os.chdir(here)


def test_the_whole_controller_list_in_order(tmp_path: Path) -> None:
    (tmp_path / "ctl.conf").write_text("SlurmctldHost=b1(10.0.0.2)\n")
    main = tmp_path / "cluster.conf"
    main.write_text("ClusterName=c\nslurmctldhost=a1(10.0.0.1)\nInclude ctl.conf\n"
                    "SLURMCTLDHOST = c1 \\\n  SlurmctldPort=6900\n")
    got = read(str(main))
    assert got.hosts == (("a1", "10.0.0.1"), ("b1", "10.0.0.2"), ("c1", "c1"))
    assert got.port == 6900
    assert quick(main) == full(main)


def test_include_by_cluster_name(tmp_path: Path) -> None:
    (tmp_path / "site-alpha.conf").write_text("SlurmctldPort=7001\nAuthKeyFile=k/ranch.key\n")
    main = tmp_path / "cluster.conf"
    main.write_text("ClusterName=Alpha\nInclude site-%c.conf\n")
    got = read(str(main))
    assert (got.port, got.key_file) == (7001, str(tmp_path / "k" / "ranch.key"))
    assert quick(main) == full(main)


def test_refusals_name_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "ctl.conf").write_text("# the controllers\n\nSlurmctldPort=68x17\n")
    main = tmp_path / "cluster.conf"
    main.write_text("SlurmctldHost=a\nInclude ctl.conf\n")
    with pytest.raises(ClientConfError) as info:
        read(str(main))
    assert str(info.value) == f"{tmp_path}/ctl.conf:3: SlurmctldPort: '68x17' is not a whole number"
    main.write_text("SlurmctldHost=a\nAuthKeyFile=\"/k\nInclude ctl.conf\n")
    with pytest.raises(ClientConfError) as info:
        read(str(main))
    assert info.value.where == f"{main}:2" and "unterminated" in info.value.message
    assert quick(main) == full(main)


def test_reading_imports_neither_lark_nor_attrs(tmp_path: Path) -> None:
    main = tmp_path / "cluster.conf"
    main.write_text("SlurmctldHost=a(127.0.0.1)\nNodeName=n1 CPUs=1\n")
    code = (f"import sys; from ranch.conf.client import read; read({str(main)!r}); "
            "print(sorted(m for m in ('lark', 'attr', 're', 'cattrs') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == "[]"
