"""The node side's shape (issue 42), read from the source: nodes/ imports nothing of jobs/ (nor
of the layers above it), TYPE_CHECKING imports included; its ports are narrow; no node component
names the registry's class, only the port it is given; the registry builds no other owner."""

from __future__ import annotations

import ast
from pathlib import Path

NODES = Path(__file__).resolve().parents[2] / "ranch" / "ctld" / "nodes"
ABOVE = ("ranch.ctld.jobs", "ranch.ctld.rpc", "ranch.ctld.web", "ranch.ctld.pair",
         "ranch.ctld.compose", "ranch.ctld.daemon", "ranch.ctld.main", "ranch.ctld.__main__",
         "ranch.ctld.ports")
MAX_PORT = 10


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return out


def _breaches(path: Path) -> list[str]:
    return [f"{path.name} imports {name}" for name in _imports(path)
            if any(name == a or name.startswith(a + ".") for a in ABOVE)]


def test_nodes_import_nothing_of_the_job_side_or_above() -> None:
    broken = [b for p in sorted(NODES.glob("*.py")) for b in _breaches(p)]
    assert not broken, "\n".join(broken)


def test_the_rule_finds_an_import_of_the_job_side(tmp_path: Path) -> None:
    p = tmp_path / "x.py"
    p.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                 "    from ranch.ctld.jobs.store import Jobs\n")
    assert _breaches(p) == ["x.py imports ranch.ctld.jobs.store",
                            "x.py imports ranch.ctld.jobs.store.Jobs"]


def _members(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> set[str]:
    names = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    names |= {f.target.id for f in cls.body
              if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name)}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            names |= _members(classes[base.id], classes)
    return names


def test_node_ports_are_narrow() -> None:
    tree = ast.parse((NODES / "ports.py").read_text())
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    widths = {name: len(_members(c, classes)) for name, c in classes.items()}
    assert widths and all(0 < w <= MAX_PORT for w in widths.values()), widths


def test_components_name_a_port_not_the_registry() -> None:
    """Only the composition root hands the registry out; a component names the port it gets."""
    named = [p.name for p in sorted(NODES.glob("*.py"))
             if p.name != "registry.py" and any(
                 i.startswith("ranch.ctld.nodes.registry") for i in _imports(p))]
    assert named == []
