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
    FairShare by Fair Tree's rank (equal LevelFS share a rank; the top user gets 1.0)."""
    root = db.base_assoc(ROOT, cluster)
    if root is None:
        return []
    total = usage.get(root.id, 0.0)
    out = [ShareRow(0, ROOT, "", "", root.id, -1, 1.0, total, 1.0 if total else 0.0,
                    1.0 if total else 0.0, math.inf, None, root.limit("GrpTRESMins"))]
    ranked: list[tuple[tuple[float, ...], int]] = []  # (LevelFS path, index in out) of users

    def walk(parent: Assoc, depth: int, path: tuple[float, ...]) -> None:
        kids = children(db, cluster, parent)
        sibling_shares = sum(shares_of(k) for k in kids) or 1
        parent_usage = usage.get(parent.id, 0.0)
        figures = []
        for k in kids:
            raw = usage.get(k.id, 0.0)
            norm_s = shares_of(k) / sibling_shares
            eff = raw / parent_usage if parent_usage > 0 else 0.0
            figures.append((k, norm_s, raw, eff, level_fs(norm_s, eff)))
        # Fair Tree walks siblings by LevelFS, highest first; sshare prints them in tree order
        for k, norm_s, raw, eff, lfs in figures:
            out.append(ShareRow(depth, k.account, k.user, k.partition, k.id, k.shares, norm_s,
                                raw, raw / total if total else 0.0, eff, lfs,
                                None, k.limit("GrpTRESMins")))
            if k.user:
                ranked.append(((*path, lfs), len(out) - 1))
            else:
                walk(k, depth + 1, (*path, lfs))

    walk(root, 1, ())
    _rank(out, ranked)
    return out


def _rank(out: list[ShareRow], ranked: list[tuple[tuple[float, ...], int]]) -> None:
    """fair_tree.c: users in the order of the walk (higher LevelFS first at every level);
    fs = rank / user_count, ties sharing the higher rank."""
    n = len(ranked)
    order = sorted(ranked, key=lambda r: tuple(-x for x in r[0]))
    rank, prev = n, None
    for i, (path, idx) in enumerate(order):
        if path != prev:
            rank, prev = n - i, path
        out[idx] = attrs.evolve(out[idx], fairshare=rank / n if n else 0.0)
