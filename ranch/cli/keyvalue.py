"""Key=Value command words (`rcontrol update NodeName=n1 State=DRAIN`), read one way for every
subcommand that takes them."""

from __future__ import annotations

from collections.abc import Mapping

from ranch.cli.controller import CliError


def parse_key_values(command: str, words: list[str], keys: Mapping[str, str],
                     supported: str) -> dict[str, str]:
    """{canonical key: value} of `words`; `keys` maps each accepted spelling (lower case) to its
    canonical key, `supported` is said when a word names another (usage errors exit 2)."""
    out: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep:
            raise CliError(f"{command}: expected Key=Value, got {word!r}")
        canonical = keys.get(key.lower())
        if canonical is None:
            raise CliError(f"{command}: {key!r} is not supported ({supported})")
        out[canonical] = value
    return out
