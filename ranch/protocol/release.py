"""The release a program belongs to, `ranch X.Y.Z`, from the installed package's metadata."""

from __future__ import annotations


def version_text() -> str:
    # Imported here: importlib.metadata costs a command more than its whole everyday work.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"ranch {version('ranch')}"
    except PackageNotFoundError:
        return "ranch (version unknown: the package is not installed)"
