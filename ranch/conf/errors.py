"""Config diagnostics: every problem carries PATH:LINE:COL and renders the line with a caret."""

from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class ConfDiagnostic:
    """One error or warning about a config file; line and col are 1-based (0 = whole file)."""

    path: str
    line: int
    col: int
    message: str
    source_line: str = ""
    severity: str = "error"

    def format(self) -> str:
        """`PATH:LINE:COL: message`, then the source line and a caret under the column."""
        prefix = "warning: " if self.severity == "warning" else ""
        if self.line <= 0:
            return f"{self.path}: {prefix}{self.message}"
        head = f"{self.path}:{self.line}:{self.col}: {prefix}{self.message}"
        if not self.source_line:
            return head
        src = self.source_line.rstrip("\r\n")
        # Keep tabs in the indent so the caret lines up under tab-indented text.
        pad = "".join(c if c == "\t" else " " for c in src[: max(self.col - 1, 0)])
        return f"{head}\n    {src}\n    {pad}^"

    def __str__(self) -> str:
        return self.format()


class ConfigError(Exception):
    """The config could not be loaded; `.errors` holds every error found, not only the first."""

    def __init__(
        self,
        errors: tuple[ConfDiagnostic, ...] | list[ConfDiagnostic],
        warnings: tuple[ConfDiagnostic, ...] | list[ConfDiagnostic] = (),
    ) -> None:
        self.errors: tuple[ConfDiagnostic, ...] = tuple(errors)
        self.warnings: tuple[ConfDiagnostic, ...] = tuple(warnings)
        super().__init__("\n".join(d.format() for d in self.errors))
