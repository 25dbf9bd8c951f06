"""What the accounts owner is given of the state layer: a door to report its changes."""

from __future__ import annotations

from typing import Any, Protocol


class AccountChanges(Protocol):
    """The change log (ctld/state/changelog.py), as the accounts owner reports its tree."""

    def accounts_changed(self, record: dict[str, Any]) -> None: ...
