"""One owner per piece of controller state, read from the source: in ranch/ctld, a field of
another object is written only when that object is a record of the writer's own part (a node
record inside ctld/nodes/, a job or step inside ctld/jobs/, a connection inside ctld/rpc/) or a
library's object built on the spot. Anything else (a component planting a callback on the job
history, the saver setting the store's thread choice, the job store writing a node's memory) is
state changed behind its owner's back: give the owner a method or a constructor argument."""

from __future__ import annotations

import ast
from pathlib import Path

CTLD = Path(__file__).resolve().parents[1] / "ranch" / "ctld"

# the name a record goes by -> the part of ctld that owns that kind of record
RECORDS = {
    "node": "nodes",  # NodeRecord (ctld/nodes/node.py)
    "job": "jobs",  # Job (ctld/jobs/jobrecord.py)
    "step": "jobs",
    "entry": "jobs",  # a dependency's cached verdict (ctld/jobs/dependencies.py)
    "conn": "rpc",  # Connection (ctld/rpc/server.py), its reader's fields included
    "decoder": "rpc",  # a connection's frame decoder (its session key)
    "fs": "pair",  # the standby's own framed stream to a command (ctld/pair/standby.py)
}
# objects of a library, made and configured where they are written
LIBRARY = {
    ("logs.py", "logging"),  # the logging module's record-building switches
    ("logs.py", "log"),  # a logger built there
    ("main.py", "args"),  # argparse's namespace
    ("deadlines.py", "self._scope"),  # trio's cancel scope: its deadline is its API
    ("web/server.py", "config"),  # hypercorn's Config, built there
    ("web/server.py", "web_app.state"),  # starlette's per-app state
    ("web/app.py", "app.state"),
}


def _writes(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(t, ast.Attribute):
                    yield t


def _breaches(path: Path, rel: str) -> list[str]:
    part = rel.split("/", 1)[0] if "/" in rel else ""
    out = []
    for t in _writes(ast.parse(path.read_text(), str(path))):
        base = ast.unparse(t.value)
        if base == "self" or (rel, base) in LIBRARY:
            continue
        name = base.rsplit(".", 1)[-1]  # reader.conn -> conn
        owner = RECORDS.get(name)
        if owner is not None and owner == part:
            continue
        why = (f"a {name} record belongs to ctld/{owner}/" if owner else "another owner's state")
        out.append(f"ranch/ctld/{rel}:{t.lineno} writes {base}.{t.attr} ({why})")
    return out


def test_ctld_writes_only_its_own_records() -> None:
    breaches = []
    for path in sorted(CTLD.rglob("*.py")):
        breaches += _breaches(path, path.relative_to(CTLD).as_posix())
    assert not breaches, "state written behind its owner's back:\n" + "\n".join(breaches)


def test_the_rule_finds_a_write_behind_an_owner(tmp_path: Path) -> None:
    """The rule itself: what the fixes of issue 29 took out is found again."""
    cases = {
        "jobs/acct.py": "def f(history, wake):\n    history.poke = wake.set\n",
        "state/saving.py": "class S:\n    def run(self):\n        self.store.in_thread = True\n",
        "jobs/store.py": "def f(node, use):\n    node.alloc_mem = use.mem\n",
        "nodes/nodetraffic.py": "def f(conn, msg):\n    conn.node = msg.name\n",
    }
    found = []
    for rel, src in cases.items():
        p = tmp_path / rel.replace("/", "_")
        p.write_text(src)
        found += _breaches(p, rel)
    assert [f.split(" writes ")[1].split(" (")[0] for f in found] == [
        "history.poke", "self.store.in_thread", "node.alloc_mem", "conn.node"]
    ok = tmp_path / "ok.py"
    ok.write_text("def f(node):\n    node.hb_stage = 1\n")
    assert _breaches(ok, "nodes/liveness.py") == []
