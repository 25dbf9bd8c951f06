"""sshare's rows over the tree and its usage: shares, usage and the fair-share factors (Fair Tree's
LevelFS and rank, and the classic 2^(-U/S)), in the order sshare 22.05 walks the tree."""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

from ranch.assoc.db import ROOT, AcctDb
from ranch.assoc.records import FS_PARENT, Assoc


@attrs.frozen
class ShareRow:
    """One line of sshare: `depth` indents the account; `user` "" for an account's own row.
    `fairshare` is None where sshare leaves it blank (accounts under Fair Tree)."""

    depth: int
    account: str
    user: str
    partition: str
    id: int
    raw_shares: int  # FS_PARENT: Fairshare=parent; -1: root's (blank)
    norm_shares: float
    raw_usage: float
    norm_usage: float
    effective_usage: float
    level_fs: float
    fairshare: float | None
    grp_tres_mins: str


def children(db: AcctDb, cluster: str, parent: Assoc) -> list[Assoc]:
    """The associations under `parent`: its users' first, then its sub-accounts' own, each by
    name (the hierarchical sort sacctmgr and sshare share)."""
    kids = [a for a in db.assocs if a.cluster == cluster and a is not parent and (
        (a.user and a.account == parent.account and not parent.user)
        or (not a.user and a.parent == parent.account and not parent.user))]
    return sorted(kids, key=lambda a: (0, a.user, a.partition) if a.user else (1, a.account, ''))


def shares_of(a: Assoc) -> int:
    return 1 if a.shares == FS_PARENT else a.shares


def level_fs(norm_shares: float, effective: float) -> float:
    """Fair Tree's LevelFS = S/U at one level; no usage gives infinity."""
    if effective <= 0:
        return math.inf
    return norm_shares / effective


def classic(effective: float, norm_shares: float) -> float:
    """The classic fair-share factor F = 2^(-EffectvUsage/NormShares); no shares: 0."""
    if norm_shares <= 0:
        return 0.0
    return 2.0 ** (-effective / norm_shares)


def rows(db: AcctDb, cluster: str, usage: Mapping[int, float]) -> list[ShareRow]:
    """Every association of `cluster`, depth first from root's, with its figures; users'
    FairShare by Fair Tree's rank (fair_tree.c, below)."""
    root = db.base_assoc(ROOT, cluster)
    if root is None:
        return []
    total = usage.get(root.id, 0.0)
    out = [ShareRow(0, ROOT, "", "", root.id, -1, 1.0, total, 1.0 if total else 0.0,
                    1.0 if total else 0.0, math.inf, None, root.limit("GrpTRESMins"))]
    below: dict[int, list[int]] = {}  # an account's row -> its children's rows

    def walk(parent: Assoc, depth: int, at: int) -> None:
        kids = children(db, cluster, parent)
        sibling_shares = sum(shares_of(k) for k in kids) or 1
        parent_usage = usage.get(parent.id, 0.0)
        below[at] = []
        for k in kids:
            raw = usage.get(k.id, 0.0)
            norm_s = shares_of(k) / sibling_shares
            eff = raw / parent_usage if parent_usage > 0 else 0.0
            out.append(ShareRow(depth, k.account, k.user, k.partition, k.id, k.shares, norm_s,
                                raw, raw / total if total else 0.0, eff, level_fs(norm_s, eff),
                                None, k.limit("GrpTRESMins")))
            below[at].append(len(out) - 1)
            if not k.user:
                walk(k, depth + 1, len(out) - 1)

    walk(root, 1, 0)
    users = sum(1 for r in out if r.user)
    _FairTree(out, below, users).level(below[0], False)
    return out


class _FairTree:
    """fair_tree.c's walk: siblings by LevelFS, highest first; a user takes the current rank
    (rank/user_count its factor; the first gets 1.0) unless tied with the sibling before it,
    which keeps the rank; an account recurses, its children merged with those of the accounts
    tied with it, a tie carried into the first of them."""

    def __init__(self, out: list[ShareRow], below: dict[int, list[int]], users: int) -> None:
        self.out, self.below, self.users = out, below, users
        self.rank = self.i = users

    def level(self, siblings: list[int], account_tied: bool) -> None:
        order = sorted(siblings, key=lambda r: -self.out[r].level_fs)
        prev: float | None = None
        merged: set[int] = set()
        for n, r in enumerate(order):
            row = self.out[r]
            tied = True if n == 0 and account_tied else prev == row.level_fs
            prev = row.level_fs
            if row.user:
                if not tied:
                    self.rank = self.i
                self.out[r] = attrs.evolve(row, fairshare=self.rank / self.users)
                self.i -= 1
            elif r not in merged:
                group = [x for x in order[n:] if not self.out[x].user
                         and self.out[x].level_fs == row.level_fs]
                merged.update(group)
                self.level([c for x in group for c in self.below.get(x, [])], tied)
