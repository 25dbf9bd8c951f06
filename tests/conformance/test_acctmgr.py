"""sacctmgr 22.05 beside racctmgr's parser, model and renderer: one script of adds, modifies,
deletes, shows (format=, -P, -p, -n, withassoc, tree, where) and refusals, run on a private Slurm
with slurmdbd and MariaDB and, command by command, through ranch.cli.acctmgr_session.respond
over a ranch.assoc AcctDb; stdout, stderr and exit status compared (no column here shows an
id, so nothing needs masking).

The daemon path: rctld runs the same function over the tree it keeps, so the script's lines
before the first run as another user are also sent through the real racctmgr to a real rctld
(test_script_through_rctld, no Slurm needed) and must answer what the in-process path answers.

Needs slurmdbd and MariaDB (tests/conformance/slurmdbd.py); without them it skips and says why.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_missing
from tests.conformance.slurmdbd import accounting_missing

# (the command line after `sacctmgr`, what is typed at its questions, or None)
SCRIPT: tuple[tuple[str, str | None], ...] = (
    ('-i add account physics Description="Physics dept" Organization=sci', None),
    ("-i add account theory parent=physics Description=theory Organization=sci", None),
    ("-i add account physics", None),  # Nothing new added.
    ("-i add account ghost parent=nosuch", None),
    ("-i add account aa,bb,cc", None),
    ("add account zed", "n"),  # asked, declined: Changes Discarded
    ("-i add user alice account=theory", None),
    ("-i add user bob account=physics,theory DefaultAccount=physics", None),
    ("-i add user carol account=nosuch", None),
    ("-i add user dave account=bb,aa,cc partition=debug", None),
    ("-i add qos high Priority=100 MaxJobsPerUser=2 Flags=DenyOnLimit", None),
    ("-i add qos high", None),
    ("show assoc format=account,user,partition,share,qos,defaultqos -P", None),
    ("show user withassoc", None),
    ("show account withassoc", None),
    ("-n show user", None),
    ("-p show user", None),
    ("show user format=user%15,defaultaccount%-12,admin", None),
    ("show assoc where account=physics", None),
    ("show assoc where user=bob format=cluster,account,user", None),
    ("show assoc tree format=account,user", None),
    ("show user nosuch", None),
    ("-i modify user alice set MaxJobs=4 GrpTRES=cpu=8", None),
    ("-i modify account theory set GrpJobs=10 Fairshare=5", None),
    ("-i modify user where name=bob set DefaultAccount=theory", None),
    ("-i modify user where name=nosuch set MaxJobs=1", None),
    ("-i modify qos high set Priority=50 MaxWall=1:00:00", None),
    ("-i modify user alice set DefaultAccount=nosuch", None),
    ("show assoc format=account,user,share,grpjobs,maxjobs,grptres -P", None),
    ("show qos format=name,priority,flags,maxwall,maxjobspu", None),
    ("show qos", None),
    ("show assoc", None),
    ("-i delete account theory", None),
    ("-i delete user bob", None),
    ("-i delete user nosuch", None),
    ("-i delete qos high", None),
    ("-i delete qos nosuch", None),
    ("-i delete account root", None),
    ("show assoc -P format=account,user", None),
    ("show user -P", None),
    ("show account -P", None),
    # limits on add, inherited limits on modify, partitions, admin levels, QOS fields
    ("-i add account chem Description=chemistry Organization=sci", None),
    ("-i add account lim parent=chem GrpJobs=5 MaxJobs=3 Fairshare=2 MaxWall=2:00:00 "
     "GrpTRES=cpu=16,node=2", None),
    ("-i add user alice account=lim AdminLevel=Operator", None),
    ("-i add user bob account=chem,lim partition=debug,gpu MaxSubmitJobs=9", None),
    ("-i modify account chem set MaxJobs=7 QOS=normal", None),
    ("-i modify account lim set MaxJobs=-1", None),
    ("-i modify user alice set AdminLevel=Administrator", None),
    ("show assoc format=account,user,partition,share,grpjobs,grptres,maxjobs,maxsubmit,maxwall,"
     "qos -P", None),
    ("show assoc where partition=debug format=account,user,partition", None),
    ("show cluster format=cluster,share,qos,defaultqos", None),
    ("show qos -n normal", None),
    ("show qos where name=normal format=name,usagefactor,gracetime,preemptmode", None),
    ("show user format=user,admin,defaultaccount", None),
    ("show bogus", None),
    ("show user format=nosuchfield", None),
    ("-i modify user alice set Bogus=1", None),
    ("-i add qos gpu GrpTRES=cpu=40 MaxTRESPerUser=node=2,cpu=8 MaxWall=1-00:00:00 "
     "MaxSubmitJobsPerUser=10 UsageFactor=2 Preempt=normal PreemptMode=requeue", None),
    ("show qos gpu format=name,grptres,maxtrespu,maxwall,maxsubmitpu,usagefactor,preempt,"
     "preemptmode -P", None),
    ("add user nosuchuser1 account=chem", "y\n"),  # no uid: asked twice; the '\n' says no
    ("add user nosuchuser2 account=chem", "n"),  # no uid: declined at once
    ("add user alice account=chem", "y"),  # alice has a uid: asked only to commit
    ("modify account chem set GrpJobs=3", "n\n"),
    ("delete user alice", "x\nn"),  # "Y or N please", then no
    ("-i delete account lim", None),
    ("show user withassoc format=user,defaultaccount,account,partition -P", None),
    ("show assoc format=account,user,partition -P", None),
    # bad values, and a modify lists what it matched even where nothing changes
    ("-i modify user root set MaxJobs=abc", None),
    ("-i modify qos normal set MaxWall=soon", None),
    ("-i modify user root set GrpWall=soon", None),
    ("-i modify user root set GrpJobs=4", None),
    ("-i modify user root set GrpJobs=4", None),
    ("-i modify user root set GrpJobs=-1", None),
    ("-i modify qos normal set Priority=0", None),
    ("-i modify user root set DefaultAccount=root", None),
    ("-i modify account root set Fairshare=1", None),
    # the flat file: written by the command, compared as text
    ("dump {cluster} file=tree.cfg", None),
    ("dump nosuch file=tree.cfg", None),
    ("dump", None),
    # who may change the tree: "@user" runs the line as that user (bob: AdminLevel None,
    # alice: Administrator by now); reads need nothing
    ("@bob -i add account bobs", None),
    ("@bob -i add user bob account=chem", None),
    ("@bob -i add qos bobq", None),
    ("@bob -i modify user bob set MaxJobs=1", None),
    ("@bob -i delete account chem", None),
    ("@bob -n show user bob", None),
    ("@alice -i add account alices", None),
    ("@alice -i delete account alices", None),
    # the flat file read back: new accounts, users and associations; what is held already
    ("-i load file={load}", None),
    ("show assoc format=account,user,partition,share,grpjobs,maxjobs,maxwall,grptres,maxsubmit "
     "where account=bio,geo,genomics -P", None),
    ("show user carol,dan -P", None),
    ("show account bio,geo,genomics -P", None),
    ("-i load file={load}", None),  # all held: nothing new
    ("load file=nosuch.cfg", None),
    ("load", None),
    # some of a user's associations: where account=/partition=, and -s
    ("-i add account ast1,ast2", None),
    ("-i add user ed account=ast1,ast2", None),
    ("-i add user fay account=ast1 partition=debug,gpu", None),
    ("-s show user ed", None),
    ("-i delete user ed where account=ast1", None),
    ("-i delete user fay where partition=gpu", None),
    ("-i delete user where name=fay account=ast1 partition=debug", None),  # her last: she goes
    ("show assoc -P format=account,user,partition where account=ast1,ast2", None),
    ("show user ed,fay -P", None),
    ("-i modify user where account=ast2 set MaxJobs=5", None),
    ("-i modify user ed where account=ast2 set GrpJobs=2", None),
    ("-i delete user nosuch where account=ast2", None),
    # account records, QOS lists on associations (=, +=, -=), default QOS, QOS flags cleared
    ("-i add account qa", None),
    ("-i add user gus account=qa", None),
    ("-i add qos qhi,qlo", None),
    ("-i modify account qa set Description=quality Organization=sci", None),
    ("-i modify account where name=qa set Description=q2 GrpJobs=4", None),
    ("-i modify user gus set QOS=qhi,normal DefaultQOS=qhi", None),
    ("-i modify user gus set QOS+=qlo", None),
    ("-i modify user gus set QOS-=normal", None),
    ("show assoc -P format=account,user,qos,defaultqos where account=qa", None),
    ("-i modify user gus set DefaultQOS=nosuch", None),
    ("-i modify user gus set QOS=nosuch", None),
    ("-i modify account qa set DefaultQOS=qlo", None),
    ("-i modify qos qhi set Flags=DenyOnLimit,OverPartQOS GrpTRES=cpu=10 MaxJobsPerUser=3 "
     "MaxWall=30", None),
    ("show qos qhi -P format=name,flags,grptres,maxjobspu,maxwall", None),
    ("-i modify qos qhi set Flags=-1 MaxJobsPerUser=-1", None),
    ("show qos qhi -P format=name,flags,grptres,maxjobspu,maxwall", None),
    ("-i delete qos qlo", None),
    ("show assoc -P format=account,user,qos,defaultqos where account=qa", None),
    ("show account qa -P", None),
    # defaults and clusters that do not exist, verbs' other spellings, the question declined
    ("-i add account ph5,ch5", None),
    ("-i add user hal account=ph5 DefaultAccount=nosuch", None),
    ("-i add user hal DefaultAccount=ch5", None),
    ("-i add account x1 cluster=nosuch", None),
    ("-i add user hal account=ch5 cluster=nosuch", None),
    ("list assoc user=hal format=account,user", None),
    ("show assoc where cluster=nosuch", None),
    ("show user -s hal format=user,account,defaultaccount", None),
    ("-i modify user hal set adminlevel=Operator", None),
    ("show user hal", None),
    ("-i modify user hal set DefaultAccount=ph5", None),
    ("-i add user hal account=ph5", None),
    ("-i modify user hal set DefaultAccount=ph5", None),
    ("-i delete account ch5", None),
    ("show user hal -P", None),
    ("-i add qos normal,extra", None),
    ("show qos format=name,priority -n", None),
    ("create account y1 parent=ph5", "n"),
    ("update user hal set MaxWall=1-2", "n"),
    ("list user hal withassoc format=user,maxwall -P", None),
    ("rem user hal", "n"),
    # QOS values sacctmgr refuses, and those it skips with a warning and goes on
    ("-i add qos z1 Flags=Bogus", None),
    ("-i add qos z2 PreemptMode=bogus", None),
    ("-i add qos z3 Preempt=nosuch", None),
    ("-i add qos z4 Priority=abc", None),
    ("-i add qos z5 UsageFactor=abc", None),
    ("-i modify qos nosuch set Priority=3", None),
    ("-i add qos z6 Flags=NoDecay,DenyOnLimit GraceTime=60 UsageThreshold=0.5", None),
    ("show qos z6 -P format=name,flags,gracetime,usagethres", None),
    # Fairshare (a count or parent), AdminLevel read by its first letter, a width that is not
    ("-i add account x7 fairshare=abc", None),
    ("-i modify account root set fairshare=abc", None),
    ("-i add user u7 account=root adminlevel=bogus", None),
    ("-i modify user root set adminlevel=bogus", None),
    ("show assoc format=acc%x,user -n where account=root", None),
    ("-i add account x8 fairshare=parent", None),
    ("show assoc format=acc,share -P where account=x8", None),
    ("-i add account x9 qos=nosuch", None),
    ("-i add account x9 defaultqos=normal", None),
    ("show assoc format=acc,qos,defaultqos -P where account=x9", None),
    # load: Administrators only, and only callers the tree knows
    ("@bob -i load file={load}", None),
    ("@nobody -i load file={load}", None),
    # one bad account among good ones: the rest is added, the exit status says 1
    ("-i add account ac9", None),
    ("-i add user ivy account=ac9,nosuch", None),
    ("show assoc format=acc,user -P where user=ivy", None),
    # what tools ask: snakemake's Slurm plugin (accounts of a user), Open OnDemand (its
    # associations), scripts (the default account)
    ("-i add account tp1,tp2", None),
    ("-i add user jo account=tp1,tp2 DefaultAccount=tp2", None),
    ("-n -s list user jo format=account%256", None),
    ("-n -s list user jo format=Account%20", None),
    ("-nP show assoc where user=jo format=account,cluster,partition,qos", None),
    ("-n -P show user jo format=defaultaccount", None),
    ("--noheader --parsable2 show associations where users=jo format=account", None),
    ("show user jo -s -P format=user,account,partition,qos", None),
)
# the file `load` reads (in the form `dump` writes)
LOAD = """# a tree to move in
Cluster - '{cluster}':Fairshare=1:QOS='normal'
Parent - 'root'
User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1
Account - 'bio':Description='biology':Organization='life':Fairshare=3:GrpJobs=8
Account - 'geo':Fairshare=1
Parent - 'aa'
User - 'dave':Partition='debug':DefaultAccount='aa':Fairshare=1
Parent - 'bio'
User - 'carol':DefaultAccount='bio':Fairshare=1:MaxJobs=2
Account - 'genomics':Description='genomics':Organization='bio':Fairshare=1:\
MaxWallDurationPerJob=90:GrpTRES=cpu=32
Parent - 'genomics'
User - 'carol':DefaultAccount='bio':Fairshare=1
User - 'dan':Partition='debug':DefaultAccount='genomics':AdminLevel='Operator':Fairshare=2:\
MaxSubmitJobs=4
"""
Outcome = tuple[int, str, str, str]  # exit status, stdout, stderr, the file `dump` wrote
LOAD_PATH = f"/tmp/ranch-acctmgr-load-{os.getpid()}.cfg"  # the same path for both sides


def _masked(text: str) -> str:
    return re.sub(r"usec=\d+", "usec=<n>", text)  # how long load took


def _caller(line: str) -> tuple[str, list[str]]:
    words = shlex.split(line.format(cluster=SHAPE.cluster, load=LOAD_PATH))
    if words[0].startswith("@"):
        return words[0][1:], words[1:]
    return "root", words


def _has_uid(name: str) -> bool:  # what sacctmgr's uid_from_string asks of this host
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def ranch_side() -> list[Outcome]:
    from ranch.assoc.db import AcctDb
    from ranch.cli.acctmgr_session import respond

    db = AcctDb.fresh().add_cluster(SHAPE.cluster)  # as slurmdbd.py's `add cluster` leaves it
    out = []
    for line, answer in SCRIPT:
        caller, words = _caller(line)
        reply = respond(words, db, answer, known_user=_has_uid, caller=caller,
                        read=lambda path: Path(path).read_text(),
                        uid=pwd.getpwnam(caller).pw_uid)
        db = reply.db
        out.append((reply.rc, reply.out, _masked(reply.err),
                    "".join(text for _, text in reply.files)))
    return out


@pytest.fixture(scope="module")
def slurm_side() -> list[Outcome]:
    reason = slurm_missing() or accounting_missing()
    if reason:
        if os.environ.get("RANCH_REQUIRE_SLURMDBD") == "1":
            pytest.fail(f"RANCH_REQUIRE_SLURMDBD=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    slurm = SlurmCluster(SHAPE, accounting=True)
    try:
        try:
            slurm.start()
        except SlurmUnavailable as exc:
            pytest.fail(f"a private Slurm with slurmdbd could not start: {exc}", pytrace=False)
        Path(LOAD_PATH).write_text(LOAD.format(cluster=SHAPE.cluster))
        out = []
        for line, answer in SCRIPT:
            written = slurm.workdir / "tree.cfg"
            written.unlink(missing_ok=True)
            caller, words = _caller(line)
            argv = slurm.argv("sacctmgr", *words)
            if caller != "root":
                argv = ["runuser", "-u", caller, "--", *argv]
            p = subprocess.run(argv, env=slurm.env(), cwd=slurm.workdir,
                input="" if answer is None else answer, capture_output=True, text=True,
                timeout=60)
            out.append((p.returncode, p.stdout, _masked(p.stderr),
                         written.read_text() if written.exists() else ""))
        return out
    finally:
        slurm.stop()


def test_script_matches_sacctmgr(slurm_side) -> None:
    assert len(SCRIPT) >= 20
    try:
        ranch = ranch_side()
    finally:
        Path(LOAD_PATH).unlink(missing_ok=True)
    for (line, _), want, got in zip(SCRIPT, slurm_side, ranch, strict=True):
        assert got == want, f"sacctmgr {line}\n{got}\n{want}"


ROOT_LINES = next(i for i, (line, _) in enumerate(SCRIPT) if line.startswith("@"))


def test_script_through_rctld(tmp_path: Path) -> None:
    """The script's lines up to the first "@user" one (a cluster's key holder acts as root),
    by racctmgr against rctld under AccountingStorageType=accounting_storage/slurmdbd."""
    import sys

    from ranch.assoc.db import AcctDb
    from ranch.cli.acctmgr_session import respond
    from tests.integration.cluster import Cluster

    db = AcctDb.fresh().add_cluster("itest")
    work = tmp_path / "work"
    work.mkdir()
    with Cluster(tmp_path / "c", ("n1",),
                 extra="AccountingStorageType=accounting_storage/slurmdbd") as c:
        c.start_ctld()
        env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
        for line, answer in SCRIPT[:ROOT_LINES]:
            words = shlex.split(line.format(cluster="itest"))
            want = respond(words, db, answer, known_user=_has_uid)
            db = want.db
            p = subprocess.run([sys.executable, "-m", "ranch.cli.racctmgr", *words], cwd=work,
                               env=env, input=answer or "", capture_output=True, text=True,
                               timeout=60)
            assert (p.returncode, p.stdout, p.stderr) == (want.rc, want.out, want.err), line
            for path, text in want.files:
                assert (work / path).read_text() == text, line
