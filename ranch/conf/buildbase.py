"""What every part of the config builder shares: the files read, the diagnostics, typed pairs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ranch.conf import keys
from ranch.conf.errors import ConfDiagnostic
from ranch.conf.hostlist import HostlistError, expand
from ranch.conf.model import NodeConfig
from ranch.conf.parser import Pair
from ranch.conf.refused import REFUSES
from ranch.conf.values import BadValue, as_seconds_or_infinite

_MAX_HOSTS_SHOWN = 5


def few(names: list[str]) -> str:
    """The first few names of a long list, for messages."""
    shown = ", ".join(names[:_MAX_HOSTS_SHOWN])
    extra = len(names) - _MAX_HOSTS_SHOWN
    return f"{shown} and {extra} more" if extra > 0 else shown


class Source:
    """One file read: the name used in diagnostics and its text (split into lines on demand)."""

    __slots__ = ("_lines", "abspath", "display", "text")

    def __init__(self, display: str, abspath: str, text: str) -> None:
        self.display, self.abspath, self.text = display, abspath, text
        self._lines: list[str] | None = None

    def line(self, n: int) -> str:
        if self._lines is None:
            self._lines = self.text.split("\n")
        return self._lines[n - 1] if 0 < n <= len(self._lines) else ""


def own_suspend_time(text: str) -> int:
    """A node's or partition's SuspendTime: seconds, or -1 for INFINITE (never suspended)."""
    seconds = as_seconds_or_infinite(text)
    return -1 if seconds is None else seconds


# A value as written, where it was written, and its typed form.
Val = tuple[Any, Pair, Source]


class BuilderBase:
    """The builder's state and the checks every kind of line uses."""

    def __init__(self, path: str, base_dir: str, strict: bool) -> None:
        self.path = path
        self.base_dir = base_dir
        self.strict = strict
        self.errors: list[ConfDiagnostic] = []
        self.warnings: list[ConfDiagnostic] = []
        self.files: list[tuple[str, str]] = []
        self.lines: list[tuple[Source, list[Pair]]] = []
        self.cluster_for_include: str | None = None
        self.globals: dict[str, tuple[keys.KeySpec, Pair, Source]] = {}
        self.ctl_hosts: list[tuple[Pair, Source]] = []
        self.ignored: dict[str, None] = {}
        self.nodes: list[NodeConfig] = []
        self.node_where: dict[str, tuple[Source, int]] = {}
        # Names of node lines rejected for their own error: partitions naming them get no
        # follow-on "not defined" error (the line's own error already says what is wrong).
        self.rejected_nodes: set[str] = set()
        self.node_defaults: dict[str, Val] = {}
        self.part_defaults: dict[str, Val] = {}
        self.node_default_options: dict[str, str] = {}
        self.part_default_options: dict[str, str] = {}
        self.part_all = False  # the partition being built said Nodes=ALL
        self.part_dynamic: list[str] = []  # ... and named these not-yet-defined nodes

    # -- diagnostics ------------------------------------------------------------------------

    def error(self, src: Source, line: int, col: int, msg: str) -> None:
        self.errors.append(ConfDiagnostic(src.display, line, col, msg, src.line(line)))

    def warn(self, src: Source, line: int, col: int, msg: str) -> None:
        self.warnings.append(
            ConfDiagnostic(src.display, line, col, msg, src.line(line), "warning"))

    def slurm_refuses(self, src: Source, line: int, col: int, said: str) -> None:
        """A setting slurmctld 22.05 will not start with: Ranch runs it, --strict refuses it."""
        msg = f"{REFUSES}: {said}"
        if self.strict:
            self.error(src, line, col, msg)
        else:
            self.warn(src, line, col, msg)

    def value_error(self, src: Source, p: Pair, exc: ValueError) -> None:
        off = exc.offset if isinstance(exc, BadValue) else 0
        self.error(src, p.vline, p.vcol + off, f"{p.key}: {exc}")

    def unknown_key(self, src: Source, p: Pair, table: dict[str, keys.KeySpec],
                    where: str) -> None:
        hint = keys.suggest(p.key, table)
        msg = f"unknown key {p.key!r}{where}"
        if hint:
            msg += f"; did you mean {hint!r}?"
        # slurmctld 22.05's words for it (s_p_parse_file): it will not start with the file
        said = f"{REFUSES}: Parsing error at unrecognized key: {p.key}"
        if self.strict:
            self.error(src, p.line, p.col, f"{msg} ({said})")
        else:
            self.warn(src, p.line, p.col, f"{msg} (ignored; {said})")

    def typed_pairs(
        self, src: Source, pairs: list[Pair], table: dict[str, keys.KeySpec],
        convert: dict[str, Callable[[str], Any]], where: str, aliases: dict[str, str] | None = None,
    ) -> tuple[dict[str, Val], list[tuple[str, str]]]:
        """Type every pair of a line but the first; unknown keys warn, repeated keys warn."""
        vals: dict[str, Val] = {}
        options: dict[str, str] = {}
        seen: dict[str, Pair] = {}
        for p in pairs[1:]:
            spec = table.get(p.key.lower())
            if spec is None:
                self.unknown_key(src, p, table, where)
                continue
            name = aliases.get(spec.name, spec.name) if aliases else spec.name
            if name in seen:
                self.warn(src, p.line, p.col, f"{name} specified more than once on this line, "
                          "latest value used")
            seen[name] = p
            fn = convert.get(name)
            if fn is None:
                options[name] = p.value
                self.ignored.setdefault(name)
                continue
            try:
                vals[name] = (fn(p.value), p, src)
            except ValueError as exc:
                self.value_error(src, p, exc)
        return vals, list(options.items())

    def expand_at(self, src: Source, p: Pair, text: str | None = None,
                  offset: int = 0) -> list[str] | None:
        try:
            return expand(p.value if text is None else text)
        except HostlistError as exc:
            col = getattr(exc, "col", 0) or 0
            # The caret shows where; say what, without repeating the offset.
            what = getattr(exc, "message", None) or str(exc)
            self.error(src, p.vline, p.vcol + offset + col, f"{p.key}: bad hostlist: {what}")
            return None

    def dynamic_allowed(self) -> bool:
        """MaxNodeCount set: partitions may name nodes that will join with `rnoded --dynamic`."""
        got = self.globals.get("MaxNodeCount")
        return got is not None and got[1].value.strip().isdigit() and int(got[1].value) > 0
