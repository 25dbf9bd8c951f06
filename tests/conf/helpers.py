"""Small helpers shared by the conf tests."""

from __future__ import annotations

import pytest

from ranch.conf.build import parse_config_text
from ranch.conf.errors import ConfDiagnostic, ConfigError


def errors_of(text: str, **kw: object) -> tuple[ConfDiagnostic, ...]:
    with pytest.raises(ConfigError) as info:
        parse_config_text(text, **kw)  # type: ignore[arg-type]
    return info.value.errors


def one_error(text: str, **kw: object) -> ConfDiagnostic:
    errs = errors_of(text, **kw)
    assert len(errs) == 1, [e.format() for e in errs]
    return errs[0]
