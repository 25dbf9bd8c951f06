"""ranch.assoc without a Slurm: sacctmgr's rules on the tree (refusals, inheritance, order),
the JSON round trip and the refusal of damaged records; hypothesis drives the round trips."""

from __future__ import annotations

import json
import re

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.assoc import ops
from ranch.assoc.db import AcctDb, Refused
from ranch.assoc.serial import from_json, to_json


def base() -> AcctDb:
    db = AcctDb.fresh().add_cluster("c1")
    db = ops.add_accounts(db, ("physics",)).db
    db = ops.add_accounts(db, ("theory",), parent="physics", settings={"MaxJobs": "4"}).db
    return ops.add_users(db, ("alice", "bob"), ("theory",)).db


def tree(db: AcctDb) -> tuple:
    """The db less its id counters (slurmdbd's ids move on too)."""
    return (db.clusters, db.accounts, db.users, db.assocs, db.qos)


def test_adding_to_a_missing_account_is_refused_in_sacctmgr_words() -> None:
    with pytest.raises(Refused) as exc:
        ops.add_users(base(), ("carol",), ("nosuch",))
    assert exc.value.err == (" This account 'nosuch' doesn't exist.\n        Contact your admin "
                             "to add this account.\n No associations or wckeys created.\n")
    with pytest.raises(Refused) as exc:
        ops.add_accounts(base(), ("ghost",), parent="nosuch")
    assert exc.value.err == (" Parent account 'nosuch' doesn't exist on cluster c1\n        "
                             "Contact your admin to add this account.\n No associations created.\n")


def test_what_exists_already_adds_nothing() -> None:
    for call in (lambda db: ops.add_accounts(db, ("physics",)),
                 lambda db: ops.add_users(db, ("alice",), ("theory",)),
                 lambda db: ops.add_qos(db, ("normal",))):
        with pytest.raises(Refused) as exc:
            call(base())
        assert (exc.value.out, exc.value.err) == (" Nothing new added.\n", "")


def test_deleting_nothing_and_root_are_refused() -> None:
    for call in (ops.delete_accounts, ops.delete_users, ops.delete_qos):
        with pytest.raises(Refused) as exc:
            call(base(), ["nosuch"])
        assert exc.value.out == " Nothing deleted\n"
    with pytest.raises(Refused) as exc:
        ops.delete_accounts(base(), ["root"])
    assert "not allowed to remove the root account" in exc.value.err


def test_an_account_goes_with_its_subtree_and_users_lose_that_default() -> None:
    db, gone = ops.delete_accounts(base(), ["physics"])
    assert gone == ["physics"]
    assert {(a.account, a.user) for a in db.assocs} == {("root", ""), ("root", "root")}
    assert db.account("theory") is not None  # slurmdbd keeps the sub-account's record
    assert db.user("alice").default_account == ""


def test_max_limits_and_qos_are_inherited_grp_limits_are_not() -> None:
    db = base()
    db, _ = ops.modify_assocs(db, [db.base_assoc("physics", "c1")], {"GrpJobs": "9",
                                                                      "MaxWall": "01:00:00"})
    alice = db.find_assoc("c1", "theory", "alice", "")
    assert db.effective(alice, "MaxJobs") == "4"  # from theory
    assert db.effective(alice, "MaxWall") == "01:00:00"  # from physics, through theory
    assert db.effective(alice, "GrpJobs") == ""
    assert db.effective_qos(alice) == ("normal",)  # from the cluster's root
    # theory passes MaxWall on; one command's associations in the order it made them (lft)
    assert [a.user for a in db.inheritors(db.base_assoc("physics", "c1"), {"MaxWall"})] == [
        "alice", "bob"]
    assert db.inheritors(db.base_assoc("physics", "c1"), {"MaxJobs"}) == []  # theory sets it


def test_show_assoc_order_is_users_first_then_sub_accounts_by_name() -> None:
    db = ops.add_accounts(base(), ("aaa",), parent="physics").db
    order = [(a.account, a.user) for a in db.hierarchy(db.assocs)]
    assert order == [("root", ""), ("root", "root"), ("physics", ""), ("aaa", ""),
                     ("theory", ""), ("theory", "alice"), ("theory", "bob")]


def test_a_user_without_a_default_takes_the_least_named_account() -> None:
    db = ops.add_accounts(base(), ("bb", "aa"), parent="physics").db
    db = ops.add_users(db, ("dave",), ("bb", "aa")).db
    assert db.user("dave").default_account == "aa"
    assert ops.add_users(db, ("erin",), ("bb", "aa"), default_account="bb").db.user(
        "erin").default_account == "bb"


names = st.lists(st.text("abcdefgh", min_size=1, max_size=6), min_size=1, max_size=4,
                 unique=True)


@settings(max_examples=60, deadline=None)
@given(accts=names, users=names, limit=st.sampled_from(["", "3", "17"]))
def test_delete_after_add_leaves_the_tree_as_it_was(accts, users, limit) -> None:
    before = base()
    fresh = [a for a in accts if before.account(a) is None]
    if not fresh:
        return
    added = ops.add_accounts(before, tuple(fresh), parent="physics",
                             settings={"MaxJobs": limit} if limit else {}).db
    new_users = [u for u in users if added.user(u) is None]
    if new_users:
        added = ops.add_users(added, tuple(new_users), tuple(fresh)).db
        added, _ = ops.delete_users(added, new_users)
    after, gone = ops.delete_accounts(added, fresh)
    assert gone == fresh
    assert tree(after) == tree(before)


@settings(max_examples=60, deadline=None)
@given(accts=names, users=names, qos=names)
def test_json_round_trip(accts, users, qos) -> None:
    db = base()
    fresh = tuple(a for a in accts if db.account(a) is None)
    if fresh:
        db = ops.add_accounts(db, fresh, parent="theory", description="d",
                              settings={"GrpTRES": "cpu=8", "MaxWall": "1-00:00:00"}).db
        db = ops.add_users(db, tuple(users), fresh, partitions=("debug", "gpu")).db
    new_qos = tuple(q for q in qos if db.qos_named(q) is None)
    if new_qos:
        db = ops.add_qos(db, new_qos, priority=5, flags=("DenyOnLimit",), usage_factor=1.5,
                         limits=(("MaxJobsPerUser", "2"),)).db
    text = json.dumps(to_json(db))
    assert from_json(json.loads(text)) == db


DAMAGE = [
    (lambda d: d.update(version=99), "version"),
    (lambda d: d["users"][0].update(admin_level="God"), "users[0].admin_level"),
    (lambda d: d["assocs"][1].update(shares="1"), "assocs[1].shares"),
    (lambda d: d["assocs"][0].update(limits=[["MaxJobs"]]), "assocs[0].limits"),
    (lambda d: d["qos"][0].update(flags="DenyOnLimit"), "qos[0].flags"),
    (lambda d: d["qos"][0].pop("priority"), "qos[0].priority"),
    (lambda d: d["accounts"][0].update(colour="red"), "accounts[0].colour"),
    (lambda d: d.update(next_id="7"), "next_id"),
    (lambda d: d.update(clusters={}), "clusters"),
]


@pytest.mark.parametrize(("damage", "field"), DAMAGE, ids=[f for _, f in DAMAGE])
def test_a_damaged_record_is_refused_naming_its_field(damage, field) -> None:
    raw = json.loads(json.dumps(to_json(base())))
    damage(raw)
    with pytest.raises(ValueError, match="^accounting record " + re.escape(field)):
        from_json(raw)


def test_records_are_frozen() -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        base().users[0].name = "x"  # type: ignore[misc]
