"""One owner per piece of a daemon's state, read from the source: in ranch/ctld and ranch/noded, a
field of another object is written only when that object is a record of the writer's own part (a
node record inside ctld/nodes/, a job or step inside ctld/jobs/, a connection inside ctld/rpc/, a
running job in noded/jobs.py) or a library's object built on the spot. Anything else (a component
planting a callback on the job history, the saver setting the store's thread choice, the job
store writing a node's memory, the node session clearing its health loop's report) is state
changed behind its owner's back: give the owner a method or a constructor argument."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RANCH = Path(__file__).resolve().parents[1] / "ranch"

# per daemon: the name a record goes by -> the part (folder or module) that owns such records
RECORDS = {
    "ctld": {
        "node": "nodes/",  # NodeRecord (ctld/nodes/node.py)
        "job": "jobs/",  # Job (ctld/jobs/jobrecord.py)
        "step": "jobs/",
        "entry": "jobs/",  # a dependency's cached verdict (ctld/jobs/dependencies.py)
        "conn": "rpc/",  # Connection (ctld/rpc/server.py), its reader's fields included
        "decoder": "rpc/",  # a connection's frame decoder (its session key)
        "fs": "pair/",  # the standby's own framed stream to a command (ctld/pair/standby.py)
    },
    "noded": {
        "job": "jobs.py",  # a running job (noded/runningjob.py), kept by the job runner
        "step": "steps.py",  # a running step, kept by the step runner
    },
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


def _breaches(path: Path, rel: str, daemon: str = "ctld") -> list[str]:
    out = []
    for t in _writes(ast.parse(path.read_text(), str(path))):
        base = ast.unparse(t.value)
        if base == "self" or (daemon == "ctld" and (rel, base) in LIBRARY):
            continue
        name = base.rsplit(".", 1)[-1]  # reader.conn -> conn
        owner = RECORDS[daemon].get(name)
        if owner is not None and rel.startswith(owner):
            continue
        why = (f"a {name} record belongs to {daemon}/{owner}" if owner
               else "another owner's state")
        out.append(f"ranch/{daemon}/{rel}:{t.lineno} writes {base}.{t.attr} ({why})")
    return out


@pytest.mark.parametrize("daemon", sorted(RECORDS))
def test_a_daemon_writes_only_its_own_records(daemon: str) -> None:
    breaches = []
    for path in sorted((RANCH / daemon).rglob("*.py")):
        breaches += _breaches(path, path.relative_to(RANCH / daemon).as_posix(), daemon)
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
    session = tmp_path / "session.py"
    session.write_text("class S:\n    def beat(self):\n        self.healthcheck.unsent = None\n")
    assert [f.split(" writes ")[1].split(" (")[0] for f in _breaches(session, "session.py",
                                                                        "noded")] == [
        "self.healthcheck.unsent"]
