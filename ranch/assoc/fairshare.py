"""priority/multifactor's fair-share factor of each association (Slurm 22.05): Fair Tree's rank
(fair_tree.c) by default, the classic 2^(-UE/S) under PriorityFlags=NO_FAIR_TREE."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ranch.assoc.db import ROOT, AcctDb
from ranch.assoc.records import FS_PARENT, Assoc
from ranch.assoc.shares import children, rows


def fair_tree(db: AcctDb, cluster: str, usage: Mapping[int, float]) -> dict[int, float]:
    """Fair Tree's factor of every user association (fair_tree.c: rank over user count)."""
    return {r.id: r.fairshare for r in rows(db, cluster, usage)
            if r.user and r.fairshare is not None}


def classic(db: AcctDb, cluster: str, usage: Mapping[int, float], *,
            damp: float = 1.0) -> dict[int, float]:
    """The classic factor 2^(-UE/S/damp) of every association (NO_FAIR_TREE): S the product of
    the shares over their level down from root (_normalize_assoc_shares_traditional), UE
    = UA + (UE_parent - UA) * S_child/S_siblings, UA the usage over root's
    (_set_usage_efctv); Fairshare=parent takes its parent's figures."""
    root = db.base_assoc(ROOT, cluster)
    if root is None:
        return {}
    total_usage = usage.get(root.id, 0.0)
    out: dict[int, float] = {}

    def walk(parent: Assoc, s_parent: float, ue_parent: float, at_root: bool) -> None:
        kids = children(db, cluster, parent)
        level = sum(k.shares for k in kids if k.shares != FS_PARENT)
        for k in kids:
            ua = min(usage.get(k.id, 0.0) / total_usage, 1.0) if total_usage else 0.0
            if k.shares == FS_PARENT:
                s, ue = s_parent, ue_parent
            else:
                s = s_parent * (k.shares / level) if level else 0.0
                if at_root:
                    ue = ua
                elif not level:
                    ue = ue_parent
                else:
                    ue = ua + (ue_parent - ua) * (k.shares / level)
            out[k.id] = 2.0 ** (-(ue / s) / damp) if s > 0 else 0.0
            if not k.user:
                walk(k, s, ue, at_root and k.shares == FS_PARENT)

    walk(root, 1.0, 0.0, True)
    return out


def factors(db: AcctDb, cluster: str, usage: Mapping[int, float], *, flags: Iterable[str] = (),
            damp: float = 1.0) -> dict[int, float]:
    """The factor by association id, Fair Tree unless PriorityFlags has NO_FAIR_TREE (or
    DEPTH_OBLIVIOUS, which Ranch computes as classic: docs/slurm-compat.md)."""
    if {"NO_FAIR_TREE", "DEPTH_OBLIVIOUS"} & set(flags):
        return classic(db, cluster, usage, damp=damp)
    return fair_tree(db, cluster, usage)
