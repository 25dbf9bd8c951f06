"""Render the transition table as Mermaid + Markdown.

Usage: `python -m ranch.statemachine.diagram > docs/states.md`.
"""

from __future__ import annotations

from ranch.statemachine import jobdiagram
from ranch.statemachine.events import EVENT_KINDS
from ranch.statemachine.table import CLASSES, ROWS, SAME, TABLE


def _edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = {}
    for row in ROWS:
        if row.handler.__name__ == "ignore":
            continue
        for cls in row.states:
            for to in row.to:
                key = (cls, cls if to == SAME else to)
                if row.event not in edges.setdefault(key, []):
                    edges[key].append(row.event)
    return edges


def mermaid() -> str:
    lines = ["stateDiagram-v2", "    [*] --> UNKNOWN", "    [*] --> FUTURE",
             "    [*] --> POWERED_DOWN: State=CLOUD"]
    for (src, dst), kinds in sorted(_edges().items()):
        if src == dst:
            continue  # changes within a class (flags, reasons) are in the table below
        lines.append(f"    {src} --> {dst}: {', '.join(kinds)}")
    return "\n".join(lines)


def markdown_table() -> str:
    def handler_of(cls: str, kind: str):
        row = TABLE.get((cls, kind))
        return None if row is None else row.handler

    return jobdiagram.grid(EVENT_KINDS, CLASSES, handler_of)


def handler_notes() -> str:
    seen: dict[str, str] = {}
    for row in ROWS:
        name = row.handler.__name__
        if name not in seen:
            doc = " ".join((row.handler.__doc__ or "").split())
            seen[name] = doc
    return "\n".join(f"- `{name}`: {doc}" for name, doc in sorted(seen.items()))


def render() -> str:
    return f"""# Node states

Generated from `statemachine/table.py` by `python -m ranch.statemachine.diagram > docs/states.md`;
a test fails when this file is stale. Do not edit by hand.

A node is in one of these classes (checked in this order): FUTURE (configured, not yet in the
cluster), POWERING_DOWN (`%`), POWERING_UP (`#`), POWERED_DOWN (`~`), INVALID_REG (registered
with less hardware than configured), DOWN, UNKNOWN (never registered), UP (IDLE, MIXED or
ALLOCATED, perhaps with DRAIN, FAIL, NO_RESPOND or a pending power down `!`). An event a class
has no entry for is refused with an error naming node, state and event.

## Moves between classes

```mermaid
{mermaid()}
```

## Every event in every class

{markdown_table()}

## What each handler does

{handler_notes()}
{jobdiagram.render()}"""


if __name__ == "__main__":
    print(render(), end="")
