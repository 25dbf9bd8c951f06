"""The shape of ranch/ctld that issue 42 asks for, read from the source (ast, nothing imported):
ctld's folders import only down their layers (CONTRACT-42: base, state/, nodes/ and jobs/,
rpc/ web/ pair/, the composition root), TYPE_CHECKING and lazy imports included, and no folder
cycle; no constructor is handed `self` outside the composition root; no Protocol in ctld over
ten members; no module over 400 lines (statemachine's tables excepted) nor function over 60 in
ranch/; at most five one-line forwarding methods in ctld; ctld/ports.py gone. Each checker is
shown a small tree with the breach it is meant to find. The checkers are bench/
structure_counts.py's, which prints the same figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import structure_counts as sc

RANCH = Path(__file__).resolve().parents[1] / "ranch"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A ranch/ of the given files (paths relative to ranch/), returned as its root."""
    root = tmp_path / "ranch"
    for rel, src in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(src)
    return root


def _outside_root(rows: list[str]) -> list[str]:
    return [r for r in rows if not r.startswith(tuple(f"ctld/{p}" for p in sc.COMPOSITION_ROOT))]


# -- folders -----------------------------------------------------------------------------------


def test_ctld_folders_import_down_their_layers() -> None:
    breaches = sc.layer_breaches(sc.folder_edges(RANCH))
    assert not breaches, "imports against ctld's layers:\n" + "\n".join(breaches)


def test_ctld_has_no_folder_cycle() -> None:
    found = sc.cycles(sc.folder_edges(RANCH))
    assert not found, f"folder cycles in ctld: {found}"


def test_the_layer_rule_finds_each_kind_of_breach(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "ctld/__init__.py": "",
        "ctld/logs.py": "",
        "ctld/state/__init__.py": "",
        # up, at the top of a module
        "ctld/state/saving.py": "from ranch.ctld.nodes.node import NodeRecord\n",
        "ctld/nodes/__init__.py": "",
        "ctld/nodes/node.py": "from ranch.ctld import logs\nfrom ..state import saving\n",
        # sideways, under TYPE_CHECKING only
        "ctld/nodes/power.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                "    from ranch.ctld.jobs.store import Jobs\n"),
        "ctld/jobs/__init__.py": "",
        "ctld/jobs/store.py": "from ranch.ctld.state import saving\n",
        # rpc -> web, lazily inside a function
        "ctld/rpc/server.py": "def f():\n    from ranch.ctld.web import app\n",
        "ctld/web/__init__.py": "",
        "ctld/web/app.py": "from ranch.ctld.rpc import server\n",
        # a root module in no layer
        "ctld/ports.py": "",
        "ctld/jobs/steps.py": "from ranch.ctld.ports import JobStore\n",
        "ctld/daemon.py": "from ranch.ctld.nodes import node\nfrom ranch.ctld.web import app\n",
    })
    edges = sc.folder_edges(root)
    found = {b.split(":")[0].split(" (")[0] for b in sc.layer_breaches(edges)}
    assert found == {"state -> nodes", "nodes -> jobs", "rpc -> web", "jobs -> ports.py"}
    assert sc.cycles(edges) == [["jobs", "nodes", "state"], ["rpc", "web"]]
    # the same tree with the breaches taken out is clean
    for rel in ("ctld/state/saving.py", "ctld/nodes/power.py", "ctld/rpc/server.py",
                "ctld/jobs/steps.py"):
        (root / rel).write_text("import os\n")
    clean = sc.folder_edges(root)
    assert sc.layer_breaches(clean) == [] and sc.cycles(clean) == []
    assert set(clean) == {("nodes", "base"), ("nodes", "state"), ("jobs", "state"),
                          ("web", "rpc"), ("compose", "nodes"), ("compose", "web")}


# -- constructors handed `self` ----------------------------------------------------------------


def test_no_constructor_in_ctld_is_handed_self() -> None:
    found = _outside_root(sc.self_handouts(RANCH))
    assert not found, "constructors handed `self` outside the composition root:\n" + "\n".join(
        found)


def test_the_self_rule_finds_a_constructor_handed_self(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "ctld/jobs/store.py": ("class Jobs:\n    def __init__(self, c):\n"
                               "        self.starts = JobStarts(self)\n"
                               "        self.steps = steps.JobSteps(c, owner=self)\n"
                               "        self.ok = JobListing(c.nodes, self.jobs)\n"
                               "        self.fine = record_of(self)\n"),
        "ctld/nodes/cluster.py": ("class Cluster:\n    def start(self):\n"
                                  "        self.power = PowerSave(self.config, self)\n"),
        "ctld/daemon.py": "class Daemon:\n    def __init__(self):\n        self.w = Web(self)\n",
        "ctld/compose/build.py": "def f(self):\n    return Jobs(self)\n",
    })
    assert _outside_root(sc.self_handouts(root)) == [
        "ctld/jobs/store.py:3 JobStarts(self)", "ctld/jobs/store.py:4 steps.JobSteps(self)",
        "ctld/nodes/cluster.py:3 PowerSave(self)"]
    assert len(sc.self_handouts(root)) == 5  # the composition root's are seen, and allowed


# -- hubs kept (a figure of bench/structure_counts.py; the hub classes change names with the
# rebuild, so the tree is held to "no self handed out" and the ports' widths instead) ---------


def test_the_hub_measure_finds_each_way_a_hub_is_kept(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "ctld/ports.py": ("class JobStore(Protocol):\n    @property\n"
                          "    def c(self) -> NodeSide: ...\n"
                          "    @property\n    def jobs(self) -> dict[int, Job]: ...\n"),
        "ctld/jobs/steps.py": ("class Steps:\n    def __init__(self, store: JobStore, n: int):\n"
                               "        self.store = store\n        self.c = store.c\n"
                               "        self.jobs = store.jobs\n        self.n = n\n"),
        "ctld/nodes/power.py": ("class Power:\n    def __init__(self, cluster, clock):\n"
                                "        self.c: Registry | None = cluster\n"
                                "        self.clock = clock\n"),
        "ctld/state/saving.py": "@attrs.define\nclass Saver:\n    cluster: Cluster\n    n: int\n",
        "ctld/nodes/fine.py": ("class Fine:\n    def __init__(self, set_use: Callable, "
                               "nodes: Mapping[str, NodeView]):\n"
                               "        self.set_use = set_use\n        self.nodes = nodes\n"),
    })
    assert sc.hub_holders(root) == [
        "ctld/jobs/steps.py:1 Steps: self.store = store (JobStore); self.c = store.c (NodeSide)",
        "ctld/nodes/power.py:1 Power: self.c = cluster (Registry)",
        "ctld/state/saving.py:2 Saver: cluster: Cluster"]


# -- Protocol widths ---------------------------------------------------------------------------


def test_every_protocol_in_ctld_has_at_most_ten_members() -> None:
    wide = {k: n for k, n in sc.protocol_widths(RANCH, "ctld").items()
            if n > sc.PROTOCOL_MEMBERS}
    assert not wide, f"Protocols over {sc.PROTOCOL_MEMBERS} members: {wide}"


def test_the_width_rule_counts_properties_and_inherited_members(tmp_path: Path) -> None:
    members = "".join(f"    def m{i}(self) -> None: ...\n" for i in range(7))
    root = _tree(tmp_path, {"ctld/jobs/ports.py": (
        "import typing\nfrom typing import Protocol\n"
        "class Base(typing.Protocol):\n    limit: int\n"
        "    @property\n    def name(self) -> str: ...\n"
        "    @name.setter\n    def name(self, v: str) -> None: ...\n"
        f"class Wide(Base, Protocol):\n{members}    def m7(self) -> None: ...\n"
        f"class Narrow(Protocol):\n{members}\n"
        "class NotAPort:\n" + members)})
    widths = sc.protocol_widths(root, "ctld")
    assert widths == {"ctld/jobs/ports.py:Base": 2, "ctld/jobs/ports.py:Wide": 10,
                      "ctld/jobs/ports.py:Narrow": 7}
    (root / "ctld/jobs/ports.py").write_text(
        (root / "ctld/jobs/ports.py").read_text().replace("    def m7", "    def m7b(self): ...\n"
                                                          "    def m7"))
    assert sc.protocol_widths(root, "ctld")["ctld/jobs/ports.py:Wide"] == 11


# -- sizes -------------------------------------------------------------------------------------


PACKAGES = sorted(p.name for p in RANCH.iterdir() if (p / "__init__.py").exists())


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_over_400_lines(package: str) -> None:
    long = {k: n for k, n in sc.long_modules(RANCH).items() if k.startswith(f"{package}/")}
    assert not long, f"modules over {sc.MODULE_LINES} lines: {long}"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_over_60_lines(package: str) -> None:
    long = {k: n for k, n in sc.long_functions(RANCH).items() if k.startswith(f"{package}/")}
    assert not long, f"functions over {sc.FUNCTION_LINES} lines: {long}"


def test_the_size_rules_find_a_long_module_and_a_long_function(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(59))
    method_body = body.replace("    x", "        x")
    root = _tree(tmp_path, {
        "ctld/big.py": "x = 1\n" * 401,
        "ctld/fits.py": "x = 1\n" * 400,
        "statemachine/jobtable.py": "x = 1\n" * 900,  # a transition table: exempt
        "statemachine/events.py": "x = 1\n" * 401,
        "ctld/funcs.py": (f"def fits():\n{body}"
                          f"class C:\n    async def long(self):\n{method_body}        y = 0\n"
                          "        def inner():\n            pass\n"),
    })
    assert sc.long_modules(root) == {"ctld/big.py": 401, "statemachine/events.py": 401}
    assert sc.long_functions(root) == {"ctld/funcs.py:62 C.long": 63}  # fits() is 60


# -- one-line forwarders -----------------------------------------------------------------------


def test_at_most_five_forwarding_methods_in_ctld() -> None:
    found = sc.forwarders(RANCH)
    assert len(found) <= sc.FORWARDERS_ALLOWED, (
        f"{len(found)} one-line forwarding methods (at most {sc.FORWARDERS_ALLOWED}): callers "
        "call the owner that does the work:\n" + "\n".join(found))


def test_the_forwarding_rule_finds_each_form(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"ctld/nodes/cluster.py": '''\
class Cluster:
    def snapshot(self, metrics):
        return self.views.snapshot(metrics)
    async def save(self):
        """Save now."""
        await self.saver.store.save()
    def update(self, msg):
        return nodeupdates.update_nodes(self, msg)
    def expand(self, expr):
        return expand(self, expr)
    def push(self, name, msg):
        self.power.push(name, msg)
    def cancel(self, key):
        self.live.pop(key, None)
    def own(self):
        return self.compute()
    def build(self):
        return Views(self)
    def two(self, x):
        self.a.b(x)
        return x
    def other(self, x):
        return x.a.b(self)
def module_level(self):
    return self.a.b()
'''})
    assert [f.split(" ")[1] for f in sc.forwarders(root)] == [
        "Cluster.snapshot", "Cluster.save", "Cluster.update", "Cluster.expand", "Cluster.push"]


# -- ports.py ----------------------------------------------------------------------------------


def test_ctld_ports_module_is_gone() -> None:
    assert not (RANCH / "ctld" / "ports.py").exists(), (
        "each folder declares its own ports (jobs/ports.py, nodes/ports.py, state/ports.py)")
