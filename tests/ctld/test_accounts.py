"""rctld's accounting tree (ctld/accounts/): off it refuses as sacctmgr without slurmdbd; a
question is never answered by rctld (the reply waits at the prompt, nothing kept); an accepted
change goes to the change log whole, as the journal's `acct` record; the caller is the
connection's; a damaged saved tree refuses the start."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ranch.assoc import serial
from ranch.cli.acctmgr_session import respond
from ranch.ctld.accounts.store import NO_DATABASE, Accounts, seeded
from ranch.ctld.rights import Identity
from ranch.ctld.rpc.routes import acctmgr
from ranch.ctld.state.changelog import ChangeLog
from ranch.ctld.state.integrity import DamagedState
from ranch.ctld.state.overlay import overlay
from ranch.protocol import messages as m

ADD = ("add", "account", "physics", "Description=phys", "Organization=sci")


def _accounts(enabled: bool = True) -> tuple[Accounts, ChangeLog]:
    changes = ChangeLog()
    return Accounts(cluster="c1", enabled=enabled, changes=changes, where="/s/state.json"), changes


def _send(acc: Accounts, words: tuple[str, ...], caller: str = "root", **kw: Any) -> Any:
    return acc.request(m.AcctmgrRequest(words=words, **kw), caller, 0)


def test_off_it_refuses_as_sacctmgr_without_slurmdbd() -> None:
    acc, changes = _accounts(enabled=False)
    assert _send(acc, ("show", "account")) == m.AcctmgrReply(err=NO_DATABASE, rc=1)
    assert acc.save_doc() is None and not changes.pending()


def test_a_question_waits_for_racctmgr_and_only_the_answer_changes_the_tree() -> None:
    acc, changes = _accounts()
    want = respond(list(ADD), seeded("c1"), "y", caller="root")
    first = _send(acc, ADD)
    assert first.waiting and first.out.endswith("(N/y): ") and want.out.startswith(first.out)
    assert acc.db == seeded("c1") and not changes.pending()
    done = _send(acc, ADD, stdin="y")
    assert (done.out, done.err, done.rc, done.waiting) == (want.out, want.err, want.rc, False)
    assert acc.db == want.db
    assert acc.journal_records(changes.take()) == [{"acct": serial.to_json(want.db)}]


def test_no_answer_in_time_discards_and_keeps_nothing() -> None:
    acc, changes = _accounts()
    done = _send(acc, ADD, final=True)
    assert done.out.endswith("(N/y): timeout\n Changes Discarded\n") and not done.waiting
    assert acc.db == seeded("c1") and not changes.pending()


def test_a_user_without_admin_level_is_refused_as_slurmdbd_refuses() -> None:
    acc, changes = _accounts()
    want = respond(["-i", *ADD], seeded("c1"), caller="alice")
    done = _send(acc, ADD, caller="alice", options=("immediate",))
    assert (done.out, done.err, done.rc) == (want.out, want.err, want.rc) and done.rc == 1
    assert not changes.pending()


def test_the_caller_is_the_connections() -> None:
    seen: list[tuple[str, int]] = []

    def answer(msg: m.AcctmgrRequest, caller: str, uid: int) -> m.AcctmgrReply:
        seen.append((caller, uid))
        return m.AcctmgrReply()

    msg = m.AcctmgrRequest(words=("show", "user"), user="alice", uid=1000)
    for who in (Identity(1000, 1000, "alice", False), Identity(1001, 1001, "ops", True), None):
        acctmgr(answer, SimpleNamespace(who=who), msg)  # type: ignore[arg-type]
    assert seen == [("alice", 1000), ("root", 1001), ("root", 1000)]


def test_the_saved_tree_comes_back_and_a_damaged_one_refuses_the_start() -> None:
    acc, changes = _accounts()
    _send(acc, ADD, options=("immediate",))
    record = acc.journal_records(changes.take())[0]
    doc = overlay({"accounts": serial.to_json(seeded("c1"))}, [{"seq": 1, **record}])
    back, _ = _accounts()
    back.restore(doc["accounts"])
    assert back.db == acc.db and back.save_doc() == acc.save_doc()
    broken = dict(doc["accounts"], next_id="many")
    with pytest.raises(DamagedState) as exc:
        back.restore(broken)
    assert str(exc.value) == str(DamagedState("/s/state.json", 0,
                                              "accounting record next_id: not an integer"))


def test_a_failed_write_gives_the_tree_back_to_the_next() -> None:
    acc, changes = _accounts()
    _send(acc, ADD, options=("immediate",))
    taken = changes.take()
    changes.put_back(taken)
    assert acc.journal_records(changes.take()) == [{"acct": serial.to_json(acc.db)}]
