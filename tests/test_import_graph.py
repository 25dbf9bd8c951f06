"""Ranch's import graph, read from the source: the walls between packages hold (every import,
lazy ones inside functions too), and no package has an import cycle among its modules' top-level
imports, those under TYPE_CHECKING included (a lazy import inside a function, which keeps a
command's start cheap, is not a cycle of the module structure)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "ranch"
PACKAGES = ("assoc", "cli", "conf", "ctld", "healthcheck", "noded", "protocol", "sched",
            "statemachine", "sim")
# What each package may import of Ranch (DESIGN.md): the pure cores nothing (the scheduling core
# only the other pure cores); the daemons and the commands meet only in protocol/.
MAY_IMPORT = {
    "assoc": set(),
    "conf": set(),
    "statemachine": set(),
    "sched": {"conf", "statemachine"},
    "protocol": {"conf", "statemachine"},
    "healthcheck": {"conf", "protocol"},
    "ctld": {"assoc", "conf", "statemachine", "protocol", "healthcheck", "sched"},
    "noded": {"conf", "statemachine", "protocol", "healthcheck"},
    "cli": {"assoc", "conf", "statemachine", "protocol", "sim"},
    # the simulator (issue 44) drives the scheduling core, never a daemon's code
    "sim": {"assoc", "conf", "statemachine", "sched"},
}
def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _nodes(tree: ast.AST, lazy: bool):
    """Every node, or (lazy=False) those outside function bodies."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if lazy or not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                todo.append(child)


def _imports(name: str, path: Path, known: set[str], lazy: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in _nodes(tree, lazy):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([base] if base else [])])
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and t.startswith("ranch."):
                found.add(t)
    return found


@functools.cache
def _graph(lazy: bool = False) -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {m: _imports(m, p, known, lazy) for m, p in mods.items()}


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components with more than one module (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(comp)
    return out


def test_packages_keep_their_walls() -> None:
    broken = []
    for mod, targets in _graph(lazy=True).items():
        pkg = mod.split(".")[1] if mod.count(".") else ""
        if pkg not in MAY_IMPORT:
            continue
        for t in targets:
            other = t.split(".")[1] if t.count(".") else ""
            if other and other != pkg and other not in MAY_IMPORT[pkg]:
                broken.append(f"{mod} imports {t}")
    assert not broken, "\n".join(sorted(broken))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package: str) -> None:
    graph = {m: t for m, t in _graph().items() if m.startswith(f"ranch.{package}.")}
    cycles = _components(graph)
    assert not cycles, (
        f"import cycles in ranch.{package}: {[sorted(c) for c in cycles]}. A component names "
        "the narrow interface it is given (ctld/ports.py, ctld/rpc/rpcports.py), never the class "
        "that holds it")


# Inside ctld: the state and its owners (the node registry, the job store, the store) sit under
# the layers that serve them (rpc, web, the controller pair, the daemon); they never import one.
CTLD_CORE = ("nodes", "jobs", "accounts", "state")
CTLD_ABOVE = ("rpc", "web", "pair", "daemon", "main")


def test_ctld_core_imports_no_layer_above_it() -> None:
    broken = []
    for mod, targets in _graph(lazy=True).items():
        parts = mod.split(".")
        if len(parts) < 3 or parts[1] != "ctld" or parts[2] not in CTLD_CORE:
            continue
        for t in targets:
            tp = t.split(".")
            if len(tp) > 2 and tp[1] == "ctld" and tp[2] in CTLD_ABOVE:
                broken.append(f"{mod} imports {t}")
    assert not broken, "\n".join(sorted(broken))


def test_ctld_state_imports_no_owner() -> None:
    """state/ (durability, stores, the files' formats) is the bottom of ctld's folders: it
    imports nothing of nodes/ or jobs/, lazily or under TYPE_CHECKING either; what it needs of
    an owner it names in state/ports.py."""
    broken = []
    for mod, targets in _graph(lazy=True).items():
        if not mod.startswith("ranch.ctld.state."):
            continue
        for t in targets:
            tp = t.split(".")
            if len(tp) > 2 and tp[1] == "ctld" and tp[2] in ("nodes", "jobs", "accounts"):
                broken.append(f"{mod} imports {t}")
    assert not broken, "\n".join(sorted(broken))


# The scheduling core is sans-IO: no event loop, no sockets, files, clock or logging of its own.
SCHED_NEVER = ("trio", "os", "socket", "time", "logging", "ranch.ctld", "ranch.protocol")


def _top_imports(path: Path) -> set[str]:
    """Every module an import statement in the file names (absolute ones), lazy ones too."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_sched_core_does_no_io() -> None:
    files = sorted((ROOT / "sched").rglob("*.py"))
    assert files, "ranch/sched is missing"
    broken = [f"{p.relative_to(ROOT)} imports {name}" for p in files
              for name in sorted(_top_imports(p))
              if any(name == bad or name.startswith(f"{bad}.") for bad in SCHED_NEVER)]
    assert not broken, "\n".join(broken)


def test_sched_io_check_catches_a_breach(tmp_path: Path) -> None:
    """The check above sees each kind of import it forbids."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os.path\nfrom trio import sleep\n"
                   "def f():\n    from ranch.ctld import logs\n")
    assert _top_imports(bad) >= {"os.path", "trio", "ranch.ctld", "ranch.ctld.logs"}
