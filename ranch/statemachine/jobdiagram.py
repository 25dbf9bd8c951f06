"""Render the job table (statemachine/jobtable.py) as Mermaid + Markdown for docs/states.md."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ranch.statemachine.jobevents import EVENT_KINDS
from ranch.statemachine.jobtable import CLASSES, FINISHED, JOB_ROWS, JOB_TABLE, SAME


def mermaid() -> str:
    lines = ["stateDiagram-v2", "    [*] --> PENDING: submit"]
    edges: dict[tuple[str, str], list[str]] = {}
    for row in JOB_ROWS:
        if row.handler.__name__ == "ignore":
            continue
        for cls in row.states:
            for to in row.to:
                dst = cls if to == SAME else to
                if dst != cls and row.event not in edges.setdefault((cls, dst), []):
                    edges[(cls, dst)].append(row.event)
    for (src, dst), kinds in sorted(edges.items()):
        lines.append(f"    {src} --> {dst}: {', '.join(kinds)}")
    return "\n".join(lines)


def grid(kinds: Iterable[str], classes: Sequence[str],
         handler_of: Callable[[str, str], Callable | None]) -> str:
    """Every event in every state class, as a Markdown table of handler names (the node
    table's diagram uses it too)."""
    out = ["| event | " + " | ".join(classes) + " |", "|---" * (len(classes) + 1) + "|"]
    for kind in kinds:
        cells = []
        for cls in classes:
            handler = handler_of(cls, kind)
            cells.append("refused" if handler is None else f"`{handler.__name__}`")
        out.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def markdown_table() -> str:
    return grid(EVENT_KINDS, CLASSES, lambda cls, kind: JOB_TABLE.get((cls, kind)))


def handler_notes() -> str:
    seen: dict[str, str] = {}
    for row in JOB_ROWS:
        seen.setdefault(row.handler.__name__, " ".join((row.handler.__doc__ or "").split()))
    return "\n".join(f"- `{name}`: {doc}" if doc else f"- `{name}`"
                     for name, doc in sorted(seen.items()))


def render() -> str:
    return f"""
# Job states

Generated from `statemachine/jobtable.py` (same command). {FINISHED} stands for every final
state (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, ...). Every event about
a job's processes names its run; a report about another run is ignored by the handlers (and
the stale run is killed by ctld).

```mermaid
{mermaid()}
```

{markdown_table()}

{handler_notes()}
"""
