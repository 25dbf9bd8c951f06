"""tests/deploy: Ranch installed from its wheel on hosts made of network namespaces. The
`deploy` mark selects them (`pytest -m deploy`); they skip, saying why, without root and ip."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # releases.py, hosts.py


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "deploy: installs the wheel on network-namespace hosts "
                            "(root and ip netns needed)")
