"""AcctDb: one site's accounting tree as an immutable value; every operation returns a new db and
what changed, or refuses with sacctmgr 22.05's words (src/sacctmgr/*_functions.c)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from ranch.assoc.records import INHERITED, Account, Assoc, Cluster, Qos, User

ROOT = "root"


def _own(a: Assoc) -> list[str]:
    """The inherited fields `a` sets itself."""
    return [k for k, _ in a.limits] + (["qos"] if a.qos else []) + (
        ["def_qos"] if a.def_qos else [])


class Refused(ValueError):
    """An operation sacctmgr refuses: `out` for stdout, `err` for stderr (its exact lines)."""

    def __init__(self, err: str = "", out: str = "") -> None:
        super().__init__(err or out)
        self.err, self.out = err, out


@attrs.frozen
class AcctDb:
    clusters: tuple[Cluster, ...] = ()
    accounts: tuple[Account, ...] = ()
    users: tuple[User, ...] = ()
    assocs: tuple[Assoc, ...] = ()
    qos: tuple[Qos, ...] = ()
    next_id: int = 1  # association ids, as slurmdbd's id_assoc
    next_seq: int = 1
    # the lookups' maps, made on first use: a db never changes (each operation makes a new
    # one), and a submission's checks look up its association, then every parent, in a tree of
    # thousands (bench/acct_enforce_bench.py); not part of the value
    _index: dict[str, Any] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    @classmethod
    def fresh(cls) -> AcctDb:
        """What slurmdbd creates on its first start: root's account, user root, QOS normal."""
        return cls(accounts=(Account(ROOT, "default root account", ROOT),),
                   users=(User(ROOT, ROOT, "Administrator"),),
                   qos=(Qos(1, "normal", "Normal QOS default"),))

    # -- lookups ----------------------------------------------------------------------------

    def _map(self, kind: str) -> dict[Any, Any]:
        """Each record by its key, the first of equal keys winning (as a scan finds it)."""
        got = self._index.get(kind)
        if got is None:
            got = {}
            if kind == "assoc":
                for a in self.assocs:
                    got.setdefault((a.cluster, a.account, a.user, a.partition), a)
            elif kind == "base":
                for a in self.assocs:
                    if not a.user:
                        got.setdefault((a.account, a.cluster), a)
            else:
                for r in getattr(self, kind):
                    got.setdefault(r.name, r)
            self._index[kind] = got
        return got

    def account(self, name: str) -> Account | None:
        return self._map("accounts").get(name)

    def user(self, name: str) -> User | None:
        return self._map("users").get(name)

    def qos_named(self, name: str) -> Qos | None:
        return self._map("qos").get(name)

    def base_assoc(self, account: str, cluster: str) -> Assoc | None:
        return self._map("base").get((account, cluster))

    def find_assoc(self, cluster: str, account: str, user: str, partition: str) -> Assoc | None:
        return self._map("assoc").get((cluster, account, user, partition))

    def parent_of(self, a: Assoc) -> Assoc | None:
        """The association above `a`: its account's own for a user's, else its parent's."""
        if a.user:
            return self.base_assoc(a.account, a.cluster)
        return self.base_assoc(a.parent, a.cluster) if a.parent else None

    def effective(self, a: Assoc, name: str) -> str:
        """A limit as slurmdbd reports it: the association's own, else (for the Max* ones) the
        nearest ancestor's."""
        node: Assoc | None = a
        while node is not None:
            value = node.limit(name)
            if value or name not in INHERITED:
                return value
            node = self.parent_of(node)
        return ""

    def effective_qos(self, a: Assoc) -> tuple[str, ...]:
        node: Assoc | None = a
        while node is not None:
            if node.qos:
                return node.qos
            node = self.parent_of(node)
        return ()

    def effective_def_qos(self, a: Assoc) -> str:
        node: Assoc | None = a
        while node is not None:
            if node.def_qos:
                return node.def_qos
            node = self.parent_of(node)
        return ""

    def children(self, a: Assoc) -> list[Assoc]:
        """The associations right under `a`, in slurmdbd's lft order (the newest first)."""
        if a.user:
            return []
        kids = [b for b in self.assocs if b.cluster == a.cluster and (
            (b.user and b.account == a.account) or (not b.user and b.parent == a.account))]
        return sorted(kids, key=lambda b: (-b.seq, b.id))

    def inheritors(self, a: Assoc, fields: set[str]) -> list[Assoc]:
        """The user associations under account association `a` that take one of `fields` from
        it (no value of their own), through sub-accounts that pass one on: what slurmdbd lists
        after a modify of an inherited limit (as_mysql_assoc.c _modify_unset_users)."""
        out: list[Assoc] = []
        for kid in self.children(a):
            if not fields - set(_own(kid)):
                continue
            out += [kid] if kid.user else self.inheritors(kid, fields - set(_own(kid)))
        return out

    def subtree(self, a: Assoc) -> list[Assoc]:
        out = [a]
        for kid in self.children(a):
            out += self.subtree(kid)
        return out

    def lft_order(self) -> list[Assoc]:
        """Every association in slurmdbd's lft order, cluster by cluster."""
        out: list[Assoc] = []
        for c in sorted(self.clusters, key=lambda c: c.name):
            root = self.base_assoc(ROOT, c.name)
            if root is not None:
                out += self.subtree(root)
        return out

    def hierarchy(self, assocs: Iterable[Assoc]) -> list[Assoc]:
        """sacctmgr's `show assoc` order (slurmdb_sort_hierarchical_assoc_list): the chosen
        associations in lft order hung under the nearest chosen parent (or at the top when it
        is not chosen), each level's users first, then by name (a stable sort), depth first."""
        chosen = {a.id for a in assocs}
        index: dict[int, tuple[Assoc, list]] = {}
        top: list[tuple[Assoc, list]] = []
        for a in self.lft_order():
            if a.id not in chosen:
                continue
            parent = self.parent_of(a)
            rec: tuple[Assoc, list] = (a, [])
            if parent is not None and parent.id in index:
                index[parent.id][1].append(rec)
            else:
                top.append(rec)
            index[a.id] = rec
        out: list[Assoc] = []

        def walk(level: list[tuple[Assoc, list]]) -> None:
            for a, kids in sorted(level, key=lambda r: self._sort_key(r[0])):
                out.append(a)
                walk(kids)
        walk(top)
        return out

    def _sort_key(self, a: Assoc) -> tuple[int, str]:
        if a.user:
            return 0, a.user
        return 1, a.account if self.parent_of(a) is not None else a.cluster

    # -- building ---------------------------------------------------------------------------

    def with_assocs(self, new: Iterable[Assoc]) -> AcctDb:
        """Add associations made by one command (one slurmdbd batch)."""
        added = tuple(attrs.evolve(a, id=self.next_id + i, seq=self.next_seq)
                      for i, a in enumerate(new))
        return attrs.evolve(self, assocs=self.assocs + added, next_id=self.next_id + len(added),
                            next_seq=self.next_seq + 1)

    def add_cluster(self, name: str) -> AcctDb:
        """`sacctmgr add cluster`: the cluster, its root association (QOS normal) and root's."""
        if any(c.name == name for c in self.clusters):
            raise Refused(out=f" This cluster {name} already exists.  Not adding.\n")
        db = attrs.evolve(self, clusters=(*self.clusters, Cluster(name)))
        db = db.with_assocs([Assoc(0, name, ROOT, qos=("normal",))])
        return db.with_assocs([Assoc(0, name, ROOT, user=ROOT)])
