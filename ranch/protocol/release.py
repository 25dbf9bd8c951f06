"""The release a program belongs to, `ranch X.Y.Z`, from ranch/__init__.py (the one place)."""

from __future__ import annotations

from ranch import __version__


def version_text() -> str:
    # Not importlib.metadata: it costs a command more than its whole everyday work, and an
    # editable install's metadata keeps the version of the day it was installed.
    return f"ranch {__version__}"
