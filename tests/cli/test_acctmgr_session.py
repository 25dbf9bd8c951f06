"""racctmgr's sacctmgr grammar and output over ranch.assoc without a Slurm: columns and widths,
-P/-p/-n, the commit question, refusals. The words are measured against sacctmgr 22.05 by
tests/conformance/test_acctmgr.py; these pin the mechanics fast."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.assoc.acctmgr_fields import UnknownField, column, render
from ranch.assoc.db import AcctDb
from ranch.cli.acctmgr_session import respond

QUESTION = "Would you like to commit changes? (You have 30 seconds to decide)\n"


def fresh() -> AcctDb:
    return AcctDb.fresh().add_cluster("c1")


def run(db: AcctDb, line: str, stdin: str | None = None):
    return respond(line.split(), db, stdin)


@pytest.mark.parametrize(("spec", "header", "width"), [
    ("acc", "Account", 10), ("account%-20", "Account", -20), ("defaultacc", "Def Acct", 10),
    ("maxjobspu", "MaxJobsPU", 9), ("fairshare", "Share", 9), ("qos%5", "QOS", 5),
    ("maxsubmitpu", "MaxSubmitPU", 11), ("grptresrunmins", "GrpTRESRunMins", 13),
])
def test_a_format_entry_is_matched_by_its_prefix_with_its_width(spec, header, width) -> None:
    col = column(spec)
    assert (col.header, col.width) == (header, width)


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(UnknownField, match="Unknown field 'bogus'"):
        column("bogus")


def test_a_cell_too_wide_ends_in_plus_the_header_is_cut() -> None:
    cols = [column("user%4"), column("admin%-5")]
    assert render(cols, [["alice", "Administrator"]]) == (
        "User Admin \n---- ----- \nalic+ Admi+ \n".replace("alic+", "ali+"))
    assert render(cols, [["alice", "Administrator"]], parsable="P") == (
        "User|Admin\nalice|Administrator\n")
    assert render(cols, [["a", "b"]], parsable="p", header=False) == "a|b|\n"


def test_add_then_show_with_options_anywhere() -> None:
    db = run(fresh(), "-i add account physics").db
    db = run(db, "-i add user alice account=physics").db
    done = run(db, "show assoc format=account,user -P where user=alice")
    assert (done.rc, done.out, done.err) == (0, "Account|User\nphysics|alice\n", "")
    assert run(db, "list users -n format=user,defaultaccount").out == (
        "     alice    physics \n      root       root \n")


@pytest.mark.parametrize(("stdin", "kept", "tail"), [
    ("y", True, "(N/y): \n"),
    ("n\n", False, "(N/y): \n Changes Discarded\n"),
    ("x\ny", False, "(N/y): \nY or N please\n(N/y): \n Changes Discarded\n"),
    ("xy", True, "(N/y): \nY or N please\n(N/y): \n"),
    (None, False, "(N/y): timeout\n Changes Discarded\n"),
])
def test_without_i_the_change_waits_for_a_yes(stdin, kept, tail) -> None:
    done = run(fresh(), "add account physics", stdin)
    assert done.rc == 0
    assert done.out.endswith(QUESTION + tail)
    assert (done.db.account("physics") is not None) == kept


def test_an_unknown_user_is_asked_about_first() -> None:
    db = run(fresh(), "-i add account physics").db
    done = respond("add user ghost account=physics".split(), db, "n",
                   known_user=lambda name: False)
    assert (done.rc, done.out) == (1, "There is no uid for user 'ghost'\nAre you sure you want "
                                      "to continue? (You have 30 seconds to decide)\n(N/y): \n")
    assert done.db == db


@pytest.mark.parametrize(("line", "err"), [
    ("show bogus", "No valid entity in list command\n"),
    ("-i add assoc x", "No valid entity in add command\n"),
    ("frobnicate user", "invalid keyword: frobnicate\n"),
    ("-i modify user root set Colour=red", " Unknown option: Colour=red\n"),
    ("-i modify qos normal set MaxWall=soon", " Bad MaxWall time format: MaxWall=soon\n"),
    ("-i modify user root set MaxJobs=x", "sacctmgr: error: Invalid value for MaxJobs (x)\n"),
])
def test_refusals_exit_1_on_stderr(line, err) -> None:
    done = run(fresh(), line)
    assert done.rc == 1
    assert done.err.startswith(err)
    assert done.out == ""


def test_modify_nothing_and_delete_nothing() -> None:
    assert (run(fresh(), "-i modify user where name=nosuch set MaxJobs=1").out,
            run(fresh(), "-i delete account nosuch").out) == (" Nothing modified\n",
                                                             " Nothing deleted\n")


def test_a_max_limit_is_listed_for_the_users_that_inherit_it() -> None:
    db = run(fresh(), "-i add account physics").db
    db = run(db, "-i add user alice account=physics").db
    done = run(db, "-i modify account physics set MaxJobs=3")
    assert done.out == (" Modified account associations...\n"
                        "  C = c1         A = physics of root\n"
                        "  C = c1         A = physics              U = alice    \n")
    assert run(done.db, "show assoc -P -n format=user,maxjobs where user=alice").out == "alice|3\n"


def test_changes_need_an_admin_level_reads_do_not() -> None:
    db = run(fresh(), "-i add account physics").db
    db = run(db, "-i add user bob account=physics").db
    done = respond("-i add account x".split(), db, caller="bob")
    assert (done.rc, done.err, done.db) == (
        1, " Problem adding accounts: Access/permission denied\n", db)
    assert done.out.startswith(" Adding Account(s)\n  x\n")
    assert respond("-i delete user bob".split(), db, caller="bob").err.endswith(
        " Error with request: Access/permission denied\n")
    assert respond("show user -n -P bob".split(), db, caller="bob").out == "bob|physics|None\n"
    db = run(db, "-i modify user bob set AdminLevel=Operator").db
    assert respond("-i add account x".split(), db, caller="bob").rc == 0
    assert respond("-i add qos q".split(), db, caller="bob").err == (
        " Problem adding QOS: Access/permission denied\n")  # QOS: Administrator only


def _tree(db: AcctDb) -> list[str]:
    return respond("show assoc -P -n format=account,user,partition,share,maxjobs,grptres,maxwall"
                   .split(), db).out.splitlines()


def test_dump_then_load_into_an_empty_db_moves_the_tree() -> None:
    db = run(fresh(), "-i add account physics GrpTRES=cpu=8 MaxWall=2:00:00").db
    db = run(db, "-i add account theory parent=physics Fairshare=4").db
    db = run(db, "-i add user alice account=theory,physics partition=debug MaxJobs=2").db
    files = dict(run(db, "dump c1 file=tree.cfg").files)
    moved = respond("-i load file=tree.cfg".split(), fresh(), read=files.__getitem__)
    assert moved.rc == 0, moved.err
    assert _tree(moved.db) == _tree(db)
    again = respond("-i load tree.cfg".split(), moved.db, read=files.__getitem__)
    assert (again.out, again.db) == ("For cluster c1\n Nothing new added.\n", moved.db)


def test_load_refuses_what_it_would_have_to_change() -> None:
    db = run(fresh(), "-i add account physics").db
    text = "Cluster - 'c1'\nParent - 'root'\nAccount - 'physics':Fairshare=9\n"
    done = respond("-i load file=f".split(), db, read=lambda path: text)
    assert (done.rc, done.db) == (1, db)
    assert done.err.startswith(" Account 'physics' differs from the database")
    missing = respond("load file=f".split(), db)
    assert missing.err == ' Unable to read "file=f": No such file or directory\n'


@st.composite
def trees(draw) -> AcctDb:
    """A random tree built through sacctmgr commands: accounts under earlier ones, users in
    some of them (some per partition), limits on either."""
    db = fresh()
    accounts = ["root"]
    for i in range(draw(st.integers(1, 5))):
        parent = draw(st.sampled_from(accounts))
        limit = draw(st.sampled_from(["", "GrpJobs=4", "MaxWall=90", "GrpTRES=cpu=8,node=2",
                                      "Fairshare=3"]))
        db = run(db, f"-i add account a{i} parent={parent} {limit}").db
        accounts.append(f"a{i}")
    for j in range(draw(st.integers(0, 4))):
        where = draw(st.lists(st.sampled_from(accounts[1:]), min_size=1, max_size=3,
                              unique=True))
        part = draw(st.sampled_from(["", "partition=debug"]))
        limit = draw(st.sampled_from(["", "MaxJobs=2", "MaxSubmitJobs=5"]))
        db = run(db, f"-i add user u{j} account={','.join(where)} {part} {limit}").db
    return db


@settings(max_examples=40, deadline=None)
@given(db=trees())
def test_dump_then_load_round_trip(db: AcctDb) -> None:
    files = dict(run(db, "dump c1 file=t.cfg").files)
    moved = respond("-i load file=t.cfg".split(), fresh(), read=files.__getitem__)
    assert moved.rc == 0, moved.err
    for view in ("show assoc -P format=account,user,partition,share,grpjobs,grptres,maxjobs,"
                 "maxsubmit,maxwall,qos", "show user -P", "show account -P"):
        assert run(moved.db, view).out == run(db, view).out
    assert dict(run(moved.db, "dump c1 file=t.cfg").files) == files


KEYS = ["fairshare", "account", "parent", "defaultaccount", "adminlevel", "partition", "fairshare",
        "qos", "qos+", "qos-", "defaultqos", "priority", "flags", "usagefactor", "preemptmode",
        "preempt", "gracetime", "usagethreshold", "maxjobs", "grpjobs", "maxwall", "grpwall",
        "grptres", "maxtres", "maxsubmit", "maxjobspu", "description", "organization",
        "cluster", "name", "format", "file", "bogus"]
VALUES = ["", "x", "abc", "-1", "0", "3", "1:00:00", "1-2", "cpu=4", "normal", "root", "a,b",
          "Operator", "DenyOnLimit", "requeue", "debug", "c1", "%", "user%-5"]


@st.composite
def command_lines(draw) -> list[str]:
    words = [draw(st.sampled_from(["add", "create", "modify", "update", "delete", "remove",
                                   "show", "list", "dump", "load", "bogus"]))]
    words.append(draw(st.sampled_from(["account", "user", "qos", "assoc", "cluster", "x"])))
    for _ in range(draw(st.integers(0, 6))):
        words.append(draw(st.one_of(
            st.sampled_from(["where", "set", "withassoc", "tree", "-i", "-P", "-n", "-s", "root",
                             "normal", "nosuch"]),
            st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS), st.sampled_from(VALUES)))))
    return words


@settings(max_examples=400, deadline=None)
@given(line=command_lines(), stdin=st.sampled_from([None, "", "y", "n\n", "x"]))
def test_any_command_line_gets_an_answer_never_a_traceback(line, stdin) -> None:
    """Every value is also tried where a number is wanted (a crash found this way once)."""
    db = run(fresh(), "-i add account a").db
    done = respond(line, db, stdin, read=lambda path: "Cluster - 'c1'\n")
    assert done.rc in (0, 1)
    assert (done.rc == 0) or done.err or done.out  # a refusal always says why


@pytest.mark.parametrize("line", [
    "-i add account x fairshare=abc", "-i modify account root set fairshare=abc",
    "-i add user u account=root fairshare=x", "-i add qos q priority=abc",
    "-i modify qos normal set usagefactor=x gracetime=y", "-i add account x grpjobs=-5",
    "-i add account x maxwall=soon", "-i modify user root set maxjobs=1.5",
])
def test_a_bad_number_is_answered_in_words(line) -> None:
    done = respond(line.split(), fresh())
    assert done.err  # sacctmgr's warning or refusal, never an exception


def test_load_is_for_administrators_the_tree_knows() -> None:
    db = run(fresh(), "-i add account a").db
    db = run(db, "-i add user bob account=a AdminLevel=Operator").db
    text = "Cluster - 'c1'\nParent - 'root'\nAccount - 'b'\n"
    for caller, uid, err in (
            ("bob", 1002, " Your user does not have sufficient privileges to load files.\n"),
            ("eve", 1003, " Your uid (1003) is not in the accounting system, can't load file.\n")):
        done = respond("-i load f".split(), db, caller=caller, uid=uid, read=lambda p: text)
        assert (done.rc, done.err, done.db) == (1, err, db)
