"""`rnoded` and `python -m ranch.noded`: the heap chosen (ranch.protocol.heap), then the daemon."""

from __future__ import annotations

import sys

from ranch.protocol.heap import relaunch


def main() -> int:
    relaunch()  # before the daemon's imports, which a re-exec would pay twice
    from ranch.noded.main import main as run

    return run()


if __name__ == "__main__":
    sys.exit(main())
