"""The shape of ranch/ctld read from the source (issue 42), with a script anyone can rerun: the
constructors handing out `self`, the classes holding a hub, Protocol widths, modules over 400
lines, functions over 60, one-line forwarding methods, and ctld's folder-level import edges and
cycles (TYPE_CHECKING and lazy imports included), per the layers of the issue's contract.

    .venv/bin/python bench/structure_counts.py [--root DIR] [--json] [--list]

Reads the files with `ast` (imports nothing of Ranch); prints figures, asserts nothing.
tests/test_structure.py holds the tree to the same checkers (it imports them from here).
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "ranch"

# The node registry and the job store, and the names their holders know them by today: the
# classes, and the Protocols of ctld/ports.py that stand for them whole. An unannotated
# parameter counts as a hub by its name.
HUBS = ("Cluster", "Jobs")
HUB_STAND_INS = ("Registry", "NodeSide", "JobStore", "JobsOfNodes")
HUB_PARAM_NAMES = ("cluster", "store", "registry")

MODULE_LINES = 400
FUNCTION_LINES = 60
FORWARDERS_ALLOWED = 5
PROTOCOL_MEMBERS = 10
# statemachine's transition tables are data, exempt from the module size (issue 42)
TABLE_MODULE = re.compile(r"^statemachine/\w*table\w*\.py$")

# ctld's layers (CONTRACT-42.md), lowest first. A root module of ctld not named here is in no
# layer (ports.py, which goes away).
BASE = {"logs", "deadlines", "kept", "site", "rights", "runner", "wakeup", "programs", "gctune",
        "__init__"}
ENTRY = {"daemon", "main", "__main__", "check", "reconfig", "signals"}  # the daemon, its entries
LAYER = {"base": 1, "state": 2, "nodes": 3, "jobs": 3, "accounts": 3, "rpc": 4, "web": 4,
         "pair": 4, "compose": 5}
SIDEWAYS = {("web", "rpc"), ("pair", "rpc")}
COMPOSITION_ROOT = ("daemon.py", "compose/")


def py_files(root: Path, sub: str = "") -> Iterator[tuple[str, Path]]:
    """(path relative to root, path) of every module under root/sub."""
    for p in sorted((root / sub).rglob("*.py") if (root / sub).is_dir() else []):
        yield p.relative_to(root).as_posix(), p


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _classlike(func: ast.expr) -> str | None:
    """The name a call's callee goes by when it looks like a class (Foo, mod.Foo)."""
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name and re.match(r"_?[A-Z]\w*[a-z]", name):
        return name
    return None


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


# -- constructors handed `self` --------------------------------------------------------------


def self_handouts(root: Path = ROOT, sub: str = "ctld") -> list[str]:
    """Every call of a class-looking callee given `self` as an argument, in a method."""
    out = []
    for rel, path in py_files(root, sub):
        calls = [n for n in ast.walk(_parse(path)) if isinstance(n, ast.Call)]
        for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
            name = _classlike(node.func)
            args = [*node.args, *(k.value for k in node.keywords)]
            if name and any(_is_self(a) for a in args):
                out.append(f"{rel}:{node.lineno} {ast.unparse(node.func)}(self)")
    return out


# -- classes holding a hub ---------------------------------------------------------------------


def _annotations(tree: ast.Module) -> dict[str, dict[str, str]]:
    """class -> member -> its annotation's text (class fields, properties' returns, fields set
    in __init__ with an annotation or from an annotated parameter)."""
    out: dict[str, dict[str, str]] = {}
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        members = out.setdefault(cls.name, {})
        for st in cls.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                members[st.target.id] = ast.unparse(st.annotation)
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if st.returns is not None and any(
                        ast.unparse(d) == "property" for d in st.decorator_list):
                    members[st.name] = ast.unparse(st.returns)
                if st.name == "__init__":
                    params = _param_types(st)
                    for node in ast.walk(st):
                        for target, value, ann in _self_sets(node):
                            if ann is not None:
                                members[target] = ann
                            elif isinstance(value, ast.Name) and value.id in params:
                                members[target] = params[value.id]
    return out


def _param_types(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    a = fn.args
    return {p.arg: ast.unparse(p.annotation) if p.annotation is not None else ""
            for p in [*a.posonlyargs, *a.args, *a.kwonlyargs] if p.arg != "self"}


def _self_sets(node: ast.AST) -> Iterator[tuple[str, ast.expr, str | None]]:
    """(attribute, value, annotation) of `self.x = value` / `self.x: T = value`."""
    if isinstance(node, ast.Assign):
        for t in node.targets:
            if isinstance(t, ast.Attribute) and _is_self(t.value):
                yield t.attr, node.value, None
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        t = node.target
        if isinstance(t, ast.Attribute) and _is_self(t.value):
            yield t.attr, node.value, ast.unparse(node.annotation)


def _hub_in(text: str, hubs: tuple[str, ...]) -> str | None:
    for name in re.findall(r"[A-Za-z_]\w*", text):
        if name in hubs:
            return name
    return None


def hub_holders(root: Path = ROOT, sub: str = "ctld",
                hubs: tuple[str, ...] = HUBS + HUB_STAND_INS,
                param_names: tuple[str, ...] = HUB_PARAM_NAMES) -> list[str]:
    """Each class keeping a hub: a field set in __init__ to a parameter typed (or, unannotated,
    named) as a hub, or to a member of one that is a hub (`self.c = store.c`), or a class-level
    annotated field of a hub's type (an attrs or dataclass record given one)."""
    trees = {rel: _parse(p) for rel, p in py_files(root, sub)}
    types: dict[str, dict[str, str]] = {}
    for tree in trees.values():
        for cls, members in _annotations(tree).items():
            types.setdefault(cls, {}).update(members)

    def hub_of(expr: ast.expr, params: dict[str, str]) -> str | None:
        chain: list[str] = []
        while isinstance(expr, ast.Attribute):
            chain.insert(0, expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name) or expr.id not in params:
            return None
        ann = params[expr.id]
        if not ann:
            if chain or expr.id not in param_names:
                return None
            return expr.id
        for attr in chain:  # follow the members' declared types
            cls = re.findall(r"[A-Za-z_]\w*", ann)
            ann = next((types[c][attr] for c in cls if attr in types.get(c, {})), "")
            if not ann:
                return None
        return _hub_in(ann, hubs)

    out = []
    for rel, tree in trees.items():
        for cls in ast.walk(tree):
            if not isinstance(cls, ast.ClassDef) or cls.name in hubs:
                continue
            held = []
            for st in cls.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    hub = _hub_in(ast.unparse(st.annotation), hubs)
                    if hub and "ClassVar" not in ast.unparse(st.annotation):
                        held.append(f"{st.target.id}: {hub}")
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        and st.name == "__init__":
                    params = _param_types(st)
                    for node in ast.walk(st):
                        for target, value, ann in _self_sets(node):
                            hub = (_hub_in(ann, hubs) if ann else None) or hub_of(value, params)
                            if hub:
                                held.append(f"self.{target} = {ast.unparse(value)} ({hub})")
            if held:
                out.append(f"{rel}:{cls.lineno} {cls.name}: {'; '.join(held)}")
    return out


# -- Protocol widths ---------------------------------------------------------------------------


def protocol_widths(root: Path = ROOT, sub: str = "") -> dict[str, int]:
    """`path:Name` -> members of each typing.Protocol class (its Protocol bases' included;
    a property with a setter counts once)."""
    own: dict[str, tuple[str, set[str], list[str]]] = {}
    for rel, path in py_files(root, sub):
        for cls in ast.walk(_parse(path)):
            if not isinstance(cls, ast.ClassDef):
                continue
            bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in cls.bases]
            members = set()
            for st in cls.body:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    members.add(st.name)
                elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    members.add(st.target.id)
            own[cls.name] = (rel, members, bases)

    def is_protocol(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name not in own or name in seen:
            return False
        return any(b == "Protocol" or is_protocol(b, seen | {name}) for b in own[name][2])

    def all_members(name: str) -> set[str]:
        _, members, bases = own[name]
        out = set(members)
        for b in bases:
            if b in own and is_protocol(b):
                out |= all_members(b)
        return out

    return {f"{own[n][0]}:{n}": len(all_members(n)) for n in own if is_protocol(n)}


# -- sizes -------------------------------------------------------------------------------------


def long_modules(root: Path = ROOT, limit: int = MODULE_LINES) -> dict[str, int]:
    out = {}
    for rel, path in py_files(root):
        lines = len(path.read_text().splitlines())
        if lines > limit and not TABLE_MODULE.match(rel):
            out[rel] = lines
    return out


def long_functions(root: Path = ROOT, limit: int = FUNCTION_LINES) -> dict[str, int]:
    """`path:line qualname` -> lines (def to last line; decorators not counted)."""
    out = {}
    for rel, path in py_files(root):
        for qual, fn in _functions(_parse(path)):
            n = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if n > limit:
                out[f"{rel}:{fn.lineno} {qual}"] = n
    return out


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[
        tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.<locals>.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


# -- one-line forwarding methods ---------------------------------------------------------------


CONTAINER_OPS = {"pop", "popitem", "discard", "add", "append", "appendleft", "extend", "insert",
                 "remove", "clear", "setdefault", "update", "get"}


def _forwards(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A body of one `return self.a.b(...)` / `self.a.b(...)` (awaited or not), or one
    `return f(self, ...)` / `mod.f(self, ...)` (a docstring aside). A call of a builtin
    container's method (`self.live.pop(k)`) is the owner's own work, not a forward."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], (ast.Return, ast.Expr)):
        return False
    call = body[0].value
    if isinstance(call, ast.Await):
        call = call.value
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in CONTAINER_OPS:
        return False  # the owner's work on its own dict, set or list
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute):
        base: ast.expr = f.value
        while isinstance(base, ast.Attribute):
            base = base.value
        if _is_self(base):
            return True  # self.a.b(...), self.a.b.c(...)
    if call.args and _is_self(call.args[0]) and _classlike(f) is None:
        if isinstance(f, ast.Name) or (isinstance(f, ast.Attribute) and isinstance(
                f.value, ast.Name) and f.value.id != "self"):
            return True  # f(self, ...), mod.f(self, ...)
    return False


def forwarders(root: Path = ROOT, sub: str = "ctld") -> list[str]:
    """`path:line Class.method` of every one-line forwarding method."""
    out = []
    for rel, path in py_files(root, sub):
        for qual, fn in _functions(_parse(path)):
            if "." in qual and "<locals>" not in qual and _forwards(fn):
                out.append(f"{rel}:{fn.lineno} {qual}")
    return out


# -- ctld's folders and their import edges -----------------------------------------------------


def unit_of(rel: str) -> str:
    """The folder (or layer) a module of ctld belongs to; `rel` is relative to ranch/ctld."""
    parts = rel.split("/")
    if len(parts) > 1:
        return parts[0]
    mod = parts[0].removesuffix(".py")
    if mod in BASE:
        return "base"
    if mod in ENTRY:
        return "compose"
    return mod + ".py"  # in no layer


def _imported(tree: ast.Module, modname: str, is_pkg: bool) -> Iterator[tuple[str, int]]:
    """(dotted target, line) of every import anywhere in the module (TYPE_CHECKING blocks and
    lazy imports inside functions included); relative imports resolved."""
    package = modname if is_pkg else modname.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([base] if base else [])])
            yield base, node.lineno
            for a in node.names:
                yield f"{base}.{a.name}", node.lineno


def folder_edges(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """(from unit, to unit) -> `path:line` of each import statement making that edge, between
    ctld's folders/layers (see unit_of)."""
    ctld = root / "ctld"
    mods = {}
    for rel, path in py_files(ctld):
        dotted = "ranch.ctld." + rel.removesuffix(".py").replace("/", ".")
        mods[dotted.removesuffix(".__init__")] = (rel, path)
    edges: dict[tuple[str, str], list[str]] = {}
    for dotted, (rel, path) in mods.items():
        src = unit_of(rel)
        seen = set()
        for target, line in _imported(_parse(path), dotted, path.name == "__init__.py"):
            t = target
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if not t or t == "ranch.ctld":
                continue  # `from ranch.ctld import x`: x, a module, is found on its own
            dst = unit_of(mods[t][0])
            if dst != src and (line, dst) not in seen:
                seen.add((line, dst))
                edges.setdefault((src, dst), []).append(f"ctld/{rel}:{line}")
    return edges


def layer_breaches(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    """Edges that point up, sideways where not allowed, or touch a module in no layer."""
    out = []
    for (src, dst), where in sorted(edges.items()):
        ls, ld = LAYER.get(src), LAYER.get(dst)
        if ls is None or ld is None:
            why = f"{src if ls is None else dst} is in no layer"
        elif ld < ls or (src, dst) in SIDEWAYS:
            continue
        else:
            why = "points up" if ld > ls else "sideways"
        out.append(f"{src} -> {dst} ({why}): {', '.join(where)}")
    return out


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """The strongly connected groups (more than one unit) of the folder graph."""
    graph: dict[str, set[str]] = {}
    for s, d in edges:
        graph.setdefault(s, set()).add(d)
        graph.setdefault(d, set())
    reach = {v: _reachable(graph, v) for v in graph}
    groups: list[list[str]] = []
    done: set[str] = set()
    for v in sorted(graph):
        if v in done:
            continue
        group = sorted(w for w in reach[v] if v in reach[w])
        done.update(group)
        if len(group) > 1:
            groups.append(group)
    return groups


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for w in graph[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


# -- the report --------------------------------------------------------------------------------


def measure(root: Path = ROOT, hubs: tuple[str, ...] = HUBS + HUB_STAND_INS) -> dict[str, object]:
    edges = folder_edges(root)
    widths = protocol_widths(root)
    return {
        "hubs": list(hubs),
        "self_handouts": self_handouts(root),
        "hub_holders": hub_holders(root, hubs=hubs),
        "protocol_widths": dict(sorted(widths.items(), key=lambda kv: -kv[1])),
        "long_modules": dict(sorted(long_modules(root).items(), key=lambda kv: -kv[1])),
        "long_functions": dict(sorted(long_functions(root).items(), key=lambda kv: -kv[1])),
        "forwarders": forwarders(root),
        "ports_py_exists": (root / "ctld" / "ports.py").exists(),
        "folder_edges": {f"{s} -> {d}": len(w) for (s, d), w in sorted(edges.items())},
        "layer_breaches": layer_breaches(edges),
        "folder_cycles": cycles(edges),
    }


def report(doc: dict, listing: bool) -> None:
    def section(key: str, title: str, rows: list[str] | dict) -> None:
        print(f"{title}: {len(rows)}")
        if listing:
            for r in rows:
                print(f"  {r}" + (f"  {rows[r]}" if isinstance(rows, dict) else ""))

    section("self_handouts", "constructors in ctld handed `self`", doc["self_handouts"])
    section("hub_holders", f"classes in ctld holding a hub ({', '.join(doc['hubs'])})",
            doc["hub_holders"])
    widths = doc["protocol_widths"]
    ctld_wide = {k: v for k, v in widths.items() if k.startswith("ctld/")
                 and v > PROTOCOL_MEMBERS}
    print(f"Protocols in ranch: {len(widths)}; in ctld over {PROTOCOL_MEMBERS} members: "
          f"{len(ctld_wide)}; widest: "
          + ", ".join(f"{k.rsplit(':', 1)[1]} {v}" for k, v in list(widths.items())[:4]))
    if listing:
        for k, v in widths.items():
            print(f"  {k}  {v}")
    for key, what in (("long_modules", f"modules over {MODULE_LINES} lines (statemachine tables "
                       "excepted)"), ("long_functions", f"functions over {FUNCTION_LINES} lines")):
        per = collections.Counter(k.split("/", 1)[0] for k in doc[key])
        section(key, f"{what} [{', '.join(f'{p} {n}' for p, n in sorted(per.items()))}]",
                doc[key])
    section("forwarders", "one-line forwarding methods in ctld", doc["forwarders"])
    print(f"ranch/ctld/ports.py exists: {doc['ports_py_exists']}")
    print("ctld folder import edges (import statements, TYPE_CHECKING and lazy included):")
    for e, n in doc["folder_edges"].items():
        print(f"  {e}  {n}")
    section("layer_breaches", "edges against the layers", doc["layer_breaches"])
    print(f"folder cycles (groups of folders reaching each other): {len(doc['folder_cycles'])}"
          + "".join(f"\n  {' <-> '.join(c)}" for c in doc["folder_cycles"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="a tree's ranch/ (default: this one)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--list", action="store_true", help="name what each count counts")
    ap.add_argument("--hubs", default=",".join(HUBS + HUB_STAND_INS),
                    help="the hub classes and the names standing for them (default: %(default)s)")
    args = ap.parse_args(argv)
    doc = measure(args.root.resolve(), tuple(h for h in args.hubs.split(",") if h))
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
    else:
        report(doc, args.list)
    return 0


if __name__ == "__main__":
    sys.exit(main())
