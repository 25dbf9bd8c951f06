"""racctmgr's association Priority without a Slurm (issue 44): set, inherited, cleared with -1,
refused when not a number, written by dump and read back by load. Its words are compared with
sacctmgr 22.05 in tests/conformance/test_sprio_assoc.py; these pin the mechanics fast."""

from __future__ import annotations

from ranch.assoc.acctmgr_dump import dump_lines
from ranch.assoc.acctmgr_load import load
from ranch.assoc.db import AcctDb
from ranch.cli.acctmgr_session import respond

SHOW = "show assoc format=account,user,priority -P -n"


def run(db: AcctDb, line: str):
    return respond(line.split(), db, None)


def tree() -> AcctDb:
    db = AcctDb.fresh().add_cluster("c1")
    for line in ("-i add account physics Priority=10", "-i add account bio parent=physics",
                 "-i add user alice account=physics,bio", "-i add user bob account=bio Pri=7"):
        got = run(db, line)
        assert got.rc == 0, (line, got.err)
        db = got.db
    return db


def test_priority_is_set_inherited_and_cleared() -> None:
    db = tree()
    assert run(db, SHOW).out == ("root||\nroot|root|\nphysics||10\nphysics|alice|10\nbio||10\n"
                                 "bio|alice|10\nbio|bob|7\n")
    got = run(db, "-i modify account physics set Priority=20")
    # the users taking it from physics (bio's alice through bio) are listed, as slurmdbd does
    assert got.out == (" Modified account associations...\n  C = c1         A = physics of "
                       "root\n  C = c1         A = physics              U = alice    \n"
                       "  C = c1         A = bio                  U = alice    \n")
    db = run(got.db, "-i modify user bob set Priority=-1").db  # cleared: bio's, physics'
    assert run(db, SHOW).out.splitlines()[-1] == "bio|bob|20"


def test_a_priority_that_is_no_number_is_refused() -> None:
    got = run(tree(), "-i modify account physics set Priority=high")
    assert got.rc == 1 and got.err.startswith("sacctmgr: error: Invalid value for Priority")


def test_dump_writes_it_and_load_reads_it_back() -> None:
    lines = dump_lines(tree(), "c1")
    assert "Account - 'physics':Description='physics':Organization='physics':Fairshare=1:" \
           "Priority=10" in lines
    fresh = AcctDb.fresh().add_cluster("c1")
    loaded = load(fresh, "\n".join(lines) + "\n", True, None).db
    assert run(loaded, SHOW).out == run(tree(), SHOW).out
