"""docs/states.md is generated from the table; a stale copy fails here."""

from __future__ import annotations

from pathlib import Path

from ranch.statemachine import diagram
from ranch.statemachine.table import ROWS

DOC = Path(__file__).resolve().parents[2] / "docs" / "states.md"


def test_docs_states_md_is_current() -> None:
    assert DOC.read_text() == diagram.render(), (
        "docs/states.md is stale: run `python -m ranch.statemachine.diagram > docs/states.md`"
    )


def test_diagram_mentions_every_handler() -> None:
    text = diagram.render()
    assert "stateDiagram-v2" in text
    for row in ROWS:
        assert f"`{row.handler.__name__}`" in text
