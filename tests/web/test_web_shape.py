"""ctld/web/ keeps issue 42's rules already, while the ctld-wide checks (tests/test_structure.py,
tests/test_ownership.py) still wait on other folders: no constructor handed `self`, no hub kept,
no Protocol over ten members, no module over 400 lines, no import against the layers, and no
write into another owner's container nor alias of its state. The checkers are those tests'."""

from __future__ import annotations

from pathlib import Path

from bench import structure_counts as sc
from tests import test_ownership as own

RANCH = Path(__file__).resolve().parents[2] / "ranch"
WEB = "ctld/web/"


def test_web_hands_out_no_self_and_keeps_no_hub() -> None:
    assert [r for r in sc.self_handouts(RANCH) if r.startswith(WEB)] == []
    assert [r for r in sc.hub_holders(RANCH) if r.startswith(WEB)] == []


def test_web_ports_are_narrow_and_its_modules_short() -> None:
    widths = {k: n for k, n in sc.protocol_widths(RANCH, "ctld").items() if k.startswith(WEB)}
    assert widths, "the web ports were not found"
    assert {k: n for k, n in widths.items() if n > sc.PROTOCOL_MEMBERS} == {}
    assert {k: n for k, n in sc.long_modules(RANCH).items() if k.startswith(WEB)} == {}


def test_web_imports_down_its_layer() -> None:
    assert [b for b in sc.layer_breaches(sc.folder_edges(RANCH)) if b.startswith("web ->")] == []


def test_web_writes_into_no_other_owners_state() -> None:
    found = own._each("ctld", own._container_breaches) + own._each("ctld", own._alias_breaches)
    assert [b for b in found if b.startswith(f"ranch/{WEB}")] == []
