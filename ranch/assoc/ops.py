"""add, modify and delete on an AcctDb with sacctmgr 22.05's rules (src/sacctmgr/
account_functions.c, user_functions.c, qos_functions.c); each returns the new db and what it did,
or raises Refused with sacctmgr's words. Names in the results keep sacctmgr's order."""

from __future__ import annotations

import attrs

from ranch.assoc.db import ROOT, AcctDb, Refused
from ranch.assoc.records import ADMIN_LEVELS, Account, Assoc, Qos, User, limits

NO_ACCOUNT = " This account '{}' doesn't exist.\n        Contact your admin to add this account.\n"
NO_PARENT = (" Parent account '{}' doesn't exist on cluster {}\n"
             "        Contact your admin to add this account.\n")


def may(db: AcctDb, caller: str, need: str) -> bool:
    """Whether `caller` may change the tree: root (uid 0, as slurmdbd's SlurmUser) always, else
    an AdminLevel of at least `need` (slurmdbd's is_user_min_admin_level: Operator for accounts,
    users and associations, Administrator for QOS)."""
    if caller == ROOT:
        return True
    user = db.user(caller)
    rank = ADMIN_LEVELS.index(user.admin_level) if user is not None else 0
    return rank >= ADMIN_LEVELS.index(need)


@attrs.frozen
class Added:
    db: AcctDb
    names: tuple[str, ...]  # the new accounts/users/QOS
    assocs: tuple[Assoc, ...]  # the new associations
    err: str = ""  # what was refused on the way (sacctmgr goes on with the rest)


def _clusters(db: AcctDb, clusters: tuple[str, ...]) -> tuple[str, ...]:
    return clusters or tuple(c.name for c in db.clusters)


def add_accounts(db: AcctDb, names: tuple[str, ...], *, clusters: tuple[str, ...] = (),
                 parent: str = ROOT, description: str = "", organization: str = "",
                 settings: dict[str, str] | None = None, shares: int = 1,
                 qos: tuple[str, ...] = (), def_qos: str = "") -> Added:
    new_accts, new_assocs, err = [], [], ""
    for name in names:
        if db.account(name) is None:
            org = organization or (parent if parent != ROOT else name)
            new_accts.append(Account(name, description or name, org))
        for cluster in _clusters(db, clusters):
            if db.base_assoc(name, cluster) is not None:
                continue
            if db.base_assoc(parent, cluster) is None:
                err += NO_PARENT.format(parent, cluster)
                continue
            new_assocs.append(Assoc(0, cluster, name, parent=parent, shares=shares, qos=qos,
                                    def_qos=def_qos, limits=limits(settings or {})))
    if not new_accts and not new_assocs:
        raise Refused(err=err, out=" Nothing new added.\n")
    if not new_assocs:
        raise Refused(err=err + " No associations created.\n")
    out = attrs.evolve(db, accounts=db.accounts + tuple(new_accts)).with_assocs(new_assocs)
    return Added(out, tuple(a.name for a in new_accts), tuple(out.assocs[len(db.assocs):]), err)


def add_users(db: AcctDb, names: tuple[str, ...], accounts: tuple[str, ...], *,
              default_account: str = "", admin_level: str = "", partitions: tuple[str, ...] = (),
              clusters: tuple[str, ...] = (), settings: dict[str, str] | None = None,
              shares: int = 1, qos: tuple[str, ...] = (), def_qos: str = "") -> Added:
    if not accounts and default_account:
        accounts = (default_account,)
    if default_account:  # sacctmgr appends it to the list: a repeat moves to the end
        accounts = (*(a for a in accounts if a != default_account), default_account)
    new_users, new_assocs, err = [], [], ""
    for name in names:
        if db.user(name) is None:
            # slurmdbd makes the least-named account the default when none is given
            default = default_account or (min(accounts) if accounts else "")
            if default_account and db.account(default_account) is None:
                err += NO_ACCOUNT.format(default_account)
                continue
            new_users.append(User(name, default, admin_level or "None"))
        for account in accounts:
            if db.account(account) is None:
                err += NO_ACCOUNT.format(account)
                continue
            for cluster in _clusters(db, clusters):
                if db.base_assoc(account, cluster) is None:
                    err += (f" This account '{account}' doesn't exist on cluster {cluster}\n"
                            "        Contact your admin to add this account.\n")
                    continue
                for part in partitions or ("",):
                    if db.find_assoc(cluster, account, name, part) is None:
                        new_assocs.append(Assoc(0, cluster, account, user=name, partition=part,
                                                shares=shares, qos=qos, def_qos=def_qos,
                                                limits=limits(settings or {})))
    if not new_users and not new_assocs:
        raise Refused(err=err, out=" Nothing new added.\n")
    if not new_assocs:
        raise Refused(err=err + " No associations or wckeys created.\n")
    # a user with no default account takes one of the new ones (slurmdbd marks one is_def:
    # the least-named, as measured)
    users = tuple(attrs.evolve(u, default_account=min(
        a.account for a in new_assocs if a.user == u.name))
        if not u.default_account and any(a.user == u.name for a in new_assocs) else u
        for u in db.users + tuple(new_users))
    out = attrs.evolve(db, users=users).with_assocs(new_assocs)
    return Added(out, tuple(u.name for u in new_users), tuple(out.assocs[len(db.assocs):]), err)


def add_qos(db: AcctDb, names: tuple[str, ...], **fields: object) -> Added:
    new = []
    nid = max((q.id for q in db.qos), default=0) + 1
    for name in names:
        if db.qos_named(name) is None:
            description = str(fields.get("description") or name)
            rest = {k: v for k, v in fields.items() if k != "description"}
            new.append(Qos(nid, name, description, **rest))  # type: ignore[arg-type]
            nid += 1
    if not new:
        raise Refused(out=" Nothing new added.\n")
    return Added(attrs.evolve(db, qos=db.qos + tuple(new)), tuple(q.name for q in new), ())


def _replace(db: AcctDb, old: Assoc, new: Assoc) -> AcctDb:
    return attrs.evolve(db, assocs=tuple(new if a.id == old.id else a for a in db.assocs))


def modify_assocs(db: AcctDb, chosen: list[Assoc], settings: dict[str, str], *,
                  shares: int | None = None, qos: tuple[str, ...] | None = None,
                  def_qos: str | None = None) -> tuple[AcctDb, list[Assoc]]:
    """Set limits on the chosen associations; they all come back (slurmdbd lists every
    association it matched, changed or not)."""
    changed = []
    for a in chosen:
        lim = dict(a.limits)
        lim.update(settings)
        new = attrs.evolve(a, limits=limits(lim),
                           shares=a.shares if shares is None else shares,
                           qos=a.qos if qos is None else qos,
                           def_qos=a.def_qos if def_qos is None else def_qos)
        db = _replace(db, a, new)
        changed.append(new)
    return db, changed


def modify_accounts(db: AcctDb, names: list[str], description: str,
                    organization: str) -> tuple[AcctDb, list[str]]:
    """Description and Organization of the named accounts; the matched names come back."""
    matched = [a.name for a in db.accounts if a.name in names]
    if not matched:
        raise Refused(out=" Nothing modified\n")
    accounts = tuple(attrs.evolve(a, description=description or a.description,
                                  organization=organization or a.organization)
                     if a.name in matched else a for a in db.accounts)
    return attrs.evolve(db, accounts=accounts), matched


def modify_users(db: AcctDb, names: list[str], *, default_account: str = "",
                 admin_level: str = "") -> tuple[AcctDb, list[str]]:
    if default_account:
        lacking = [n for n in names if not any(
            a.user == n and a.account == default_account for a in db.assocs)]
        if lacking:
            lines = "".join(f"  U = {n} C = {c.name}\n" for n in lacking for c in db.clusters)
            raise Refused(out=" Can't modify because these users aren't associated with new "
                              f"default account '{default_account}'...\n" + lines)
    changed = []
    users = []
    for u in db.users:
        new = u
        if u.name in names:
            new = attrs.evolve(u, default_account=default_account or u.default_account,
                               admin_level=admin_level or u.admin_level)
            changed.append(u.name)  # matched: listed even when nothing differs
        users.append(new)
    return attrs.evolve(db, users=tuple(users)), changed


def modify_qos(db: AcctDb, names: list[str], fields: dict[str, object],
               settings: dict[str, str]) -> tuple[AcctDb, list[str]]:
    """Set fields (Qos attributes) and limits on the named QOS; the matched names come back."""
    changed, out = [], []
    for q in db.qos:
        new = q
        if q.name in names:
            lim = dict(q.limits)
            lim.update(settings)
            new = attrs.evolve(q, limits=limits(lim), **fields)  # type: ignore[arg-type]
            changed.append(q.name)
        out.append(new)
    if not changed:
        raise Refused(out=" Nothing modified\n")
    return attrs.evolve(db, qos=tuple(out)), changed


def delete_accounts(db: AcctDb, names: list[str]) -> tuple[AcctDb, list[str]]:
    """An account goes with every association under it (slurmdbd removes lft..rgt); its
    sub-accounts' records stay, with no associations, as slurmdbd leaves them."""
    if ROOT in names:
        raise Refused(err=" You are not allowed to remove the root account.\n"
                          " Use remove cluster instead.\n")
    gone = [n for n in names if db.account(n) is not None]
    if not gone:
        raise Refused(out=" Nothing deleted\n")
    drop: set[int] = set()
    for a in db.assocs:
        if not a.user and a.account in gone:
            drop |= {b.id for b in db.subtree(a)}
    assocs = tuple(a for a in db.assocs if a.id not in drop)
    users = tuple(_default_kept(u, assocs) for u in db.users)
    return attrs.evolve(db, accounts=tuple(a for a in db.accounts if a.name not in gone),
                        assocs=assocs, users=users), gone


def delete_user_assocs(db: AcctDb, chosen: list[Assoc]) -> tuple[AcctDb, list[Assoc], list[str]]:
    """Some of users' associations (`delete user ... where account=...`): those go, and a user
    left with none goes too (slurmdbd: "Deleting users (No Associations)")."""
    if not chosen:
        raise Refused(out=" Nothing deleted\n")
    ids = {a.id for a in chosen}
    assocs = tuple(a for a in db.assocs if a.id not in ids)
    touched = {a.user for a in chosen}
    bare = [u.name for u in db.users if u.name in touched and not any(
        a.user == u.name for a in assocs)]
    users = tuple(_default_kept(u, assocs) for u in db.users if u.name not in bare)
    return attrs.evolve(db, assocs=assocs, users=users), chosen, bare


def _default_kept(u: User, assocs: tuple[Assoc, ...]) -> User:
    """A user whose default account lost its last association of theirs has none (slurmdbd)."""
    if any(a.user == u.name and a.account == u.default_account for a in assocs):
        return u
    return attrs.evolve(u, default_account="")


def delete_users(db: AcctDb, names: list[str]) -> tuple[AcctDb, list[str]]:
    gone = [u.name for u in db.users if u.name in names]
    if not gone:
        raise Refused(out=" Nothing deleted\n")
    return attrs.evolve(db, users=tuple(u for u in db.users if u.name not in gone),
                        assocs=tuple(a for a in db.assocs if a.user not in gone)), gone


def delete_qos(db: AcctDb, names: list[str]) -> tuple[AcctDb, list[str]]:
    gone = [q.name for q in db.qos if q.name in names]
    if not gone:
        raise Refused(out=" Nothing deleted\n")
    keep = tuple(q for q in db.qos if q.name not in gone)
    assocs = tuple(attrs.evolve(a, qos=tuple(x for x in a.qos if x not in gone),
                                def_qos="" if a.def_qos in gone else a.def_qos)
                   for a in db.assocs)
    return attrs.evolve(db, qos=keep, assocs=assocs), gone


def load(db: AcctDb, accounts: list[Account], users: list[User], acct_assocs: list[Assoc],
         user_assocs: list[Assoc]) -> AcctDb:
    """A flat file's new records (sacctmgr load): the accounts' associations in one slurmdbd
    batch, then the users' in another, each in the file's order."""
    out = attrs.evolve(db, accounts=db.accounts + tuple(accounts),
                       users=db.users + tuple(users))
    return out.with_assocs(acct_assocs).with_assocs(user_assocs)
