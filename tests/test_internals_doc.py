"""docs/internals.md names only what exists: every module path and every symbol it cites.

The document cites code in backticks in two forms: a file, `ranch/ctld/jobs/store.py`, optionally
with a symbol, `ranch/ctld/jobs/store.py:JobStore.apply`; or a dotted name,
`ranch.ctld.compose.assemble`. Both are checked from the source (AST), so a doc that names a
module, class, function or method the code no longer has fails here, not in a reader's hands.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "internals.md"
PATH_REF = re.compile(r"^(ranch(?:/[A-Za-z_][\w]*)*(?:/[A-Za-z_][\w]*\.py|/))(?::([\w.]+))?$")
DOTTED_REF = re.compile(r"^ranch(?:\.[A-Za-z_]\w*)+$")


def _refs(text: str) -> list[str]:
    return [t.strip() for t in re.findall(r"`([^`\n]+)`", text)]


def _defined(tree: ast.AST) -> dict[str, ast.AST]:
    """Top-level names a module defines (classes, functions, assignments, imports)."""
    out: dict[str, ast.AST] = {}
    for node in getattr(tree, "body", ()):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out[n.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out[(a.asname or a.name).split(".")[0]] = node
        elif isinstance(node, ast.If):  # TYPE_CHECKING blocks and the like
            out.update(_defined(ast.Module(body=node.body, type_ignores=[])))
    return out


def _members(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def symbol_missing(path: Path, symbol: str) -> str | None:
    """Why `symbol` (Name or Class.member) is not in the module at `path`; None when it is."""
    tree = ast.parse(path.read_text())
    head, _, rest = symbol.partition(".")
    found = _defined(tree).get(head)
    if found is None:
        return f"{path.relative_to(REPO)} defines no {head}"
    if rest:
        if not isinstance(found, ast.ClassDef):
            return f"{head} in {path.relative_to(REPO)} is not a class (asked for {symbol})"
        if rest.split(".")[0] not in _members(found):
            return f"{head} in {path.relative_to(REPO)} has no {rest}"
    return None


def _module_file(dotted: list[str]) -> tuple[Path | None, list[str]]:
    """The longest prefix of `dotted` that is a module or package, and the rest."""
    for cut in range(len(dotted), 0, -1):
        base = REPO.joinpath(*dotted[:cut])
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py"), dotted[cut:]
        if (base / "__init__.py").is_file():
            return base / "__init__.py", dotted[cut:]
    return None, dotted


def check_ref(ref: str) -> str | None:
    """Why a cited path or name does not exist; None when it does (or is not a code citation)."""
    if (match := PATH_REF.match(ref)) is not None:
        path = REPO / match.group(1)
        if not path.exists():
            return f"no such file or folder: {match.group(1)}"
        return symbol_missing(path, match.group(2)) if match.group(2) else None
    if DOTTED_REF.match(ref):
        path, rest = _module_file(ref.split("."))
        if path is None:
            return f"no such module: {ref}"
        return symbol_missing(path, ".".join(rest)) if rest else None
    return None


def test_every_cited_module_and_symbol_exists():
    refs = _refs(DOC.read_text())
    cited = [r for r in refs if PATH_REF.match(r) or DOTTED_REF.match(r)]
    assert len(cited) >= 40, "docs/internals.md should cite the code it describes"
    problems = sorted({p for r in cited if (p := check_ref(r)) is not None})
    assert not problems, "docs/internals.md is stale:\n" + "\n".join(problems)


@pytest.mark.parametrize("ref, complaint", [
    ("ranch/ctld/no_such_module.py", "no such file"),
    ("ranch/ctld/daemon.py:NoSuchThing", "defines no NoSuchThing"),
    ("ranch/ctld/daemon.py:Daemon.no_such_method", "has no no_such_method"),
    ("ranch.ctld.no_such_module", "defines no no_such_module"),
    ("ranch.ctld.daemon.NoSuchThing", "defines no NoSuchThing"),
])
def test_the_check_finds_each_kind_of_stale_citation(ref, complaint):
    problem = check_ref(ref)
    assert problem is not None and complaint in problem


def test_the_check_accepts_what_exists():
    assert check_ref("ranch/ctld/daemon.py:Daemon.run") is None
    assert check_ref("ranch.conf.hostlist.expand") is None
    assert check_ref("ranch/statemachine/") is None
    assert check_ref("rinfo -N") is None  # not a code citation
