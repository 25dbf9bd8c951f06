"""racctmgr against a real rctld under AccountingStorageType=accounting_storage/slurmdbd (issue
43): a short sacctmgr script over TCP answers, byte for byte, what the conformance driver's
in-process path answers for the same lines (tests/conformance/test_acctmgr.py, checked against
real sacctmgr with slurmdbd), the commit question asked here and answered on stdin; a change is
journaled before its reply (SIGKILL right after, restart, it is there); a damaged accounting
record in the state file refuses the start in one line; without the key, today's refusal."""

from __future__ import annotations

import pwd
import re
import shlex
import subprocess
import sys
from pathlib import Path

import orjson

from ranch.assoc.db import AcctDb
from ranch.cli.acctmgr_session import respond
from ranch.ctld.state import integrity
from ranch.ctld.state.integrity import DamagedState

from .cluster import REPO, Cluster

ON = "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageEnforce=associations"
# (command line, what the user types at its questions; None: nothing, it times out)
SCRIPT = [
    ("add account physics Description=phys Organization=sci", "y\n"),
    ("-i add account chem Description=chem Organization=sci Parent=physics", None),
    ("add user root Account=physics DefaultAccount=physics", "y\n"),
    ("show assoc -P format=cluster,account,user,parentname,share", None),
    ("-i modify account physics set Description=physical", None),
    ("show account -P", None),
    ("show account -n format=account%12,descr%20", None),
    ("delete account chem", "n\n"),
    ("add account later Description=later Organization=sci", None),  # nobody answers
    ("add account nope Parent=missing -i", None),  # a refusal: no such parent
    ("modify user nobodyhere set DefaultAccount=physics -i", None),
    ("-i delete account chem", None),
    ("dump itest file={dump}", None),
    ("-i load file={load}", None),  # read where racctmgr runs
    ("load file=nosuch.cfg", None),
    ("show assoc -P format=account,user", None),
]


def _racctmgr(c: Cluster, words: list[str], stdin: str | None,
              cwd: Path) -> subprocess.CompletedProcess:
    env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
    return subprocess.run([sys.executable, "-m", "ranch.cli.racctmgr", *words], cwd=cwd,
                          env=env, input=stdin or "", capture_output=True, text=True,
                          timeout=60)


LOAD = """Cluster - 'itest':Fairshare=1:QOS='normal'
Parent - 'root'
Account - 'geo':Description='geo':Organization='earth':Fairshare=1
"""


def _masked(text: str) -> str:
    return re.sub(r"usec=\d+", "usec=<n>", text)  # how long load took


def _has_uid(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def test_racctmgr_over_rctld_answers_as_the_driver(tmp_path: Path) -> None:
    db = AcctDb.fresh().add_cluster("itest")  # the conformance driver's start
    work = tmp_path / "work"
    work.mkdir()
    (work / "tree-in.cfg").write_text(LOAD)
    with Cluster(tmp_path / "c", ("n1",), extra=ON) as c:
        c.start_ctld()
        for line, typed in SCRIPT:
            words = shlex.split(line.format(dump=work / "tree.cfg", load="tree-in.cfg"))
            got = _racctmgr(c, words, typed, work)
            want = respond(words, db, typed, known_user=_has_uid,
                           read=lambda path: (work / path).read_text())
            db = want.db
            assert (got.returncode, _masked(got.stdout), _masked(got.stderr)) == (
                want.rc, _masked(want.out), _masked(want.err)), (line, got.stderr)
            for path, text in want.files:  # dump: written where racctmgr ran
                assert Path(path).read_text() == text
        assert "physical" in (work / "tree.cfg").read_text()
        assert any(a.name == "geo" for a in db.accounts)  # loaded

        # durable before acknowledged: SIGKILL right after the reply
        added = _racctmgr(c, ["-i", "add", "account", "bio", "Description=bio",
                              "Organization=life"], None, work)
        assert added.returncode == 0 and " Adding Account(s)\n  bio\n" in added.stdout
        before = _racctmgr(c, ["show", "account", "-P"], None, work).stdout
        assert "bio|bio|life" in before
        c.kill_ctld()
        c.start_ctld()
        assert _racctmgr(c, ["show", "account", "-P"], None, work).stdout == before

        # a damaged accounting record in the state file refuses the start in one line
        assert c.stop_ctld() == 0  # a clean stop: the tree is in the snapshot
        path = Path(c.state_dir) / "node_state.json"
        data = path.read_bytes()
        doc = orjson.loads(b"{" + data[integrity.HEAD:])
        assert doc["accounts"]["accounts"][-1]["name"] == "bio"
        doc["accounts"]["next_id"] = "many"
        path.write_bytes(integrity.seal(orjson.dumps(doc)))
        done = subprocess.run(
            [sys.executable, "-m", "ranch.ctld", "-f", str(c.conf_path), "--listen",
             f"127.0.0.1:{c.port}", "--state-dir", c.state_dir, "--key-file", c.key_file],
            cwd=REPO, capture_output=True, text=True, timeout=120, env=c._env())
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        assert done.stderr.splitlines()[-1] == "rctld: " + str(DamagedState(
            str(path), 0, "accounting record next_id: not an integer"))
        assert path.read_bytes() == integrity.seal(orjson.dumps(doc))  # left as it was
        # rctld -i starts without it: a fresh tree, and the next start finds the file whole
        c.start_ctld("-i")
        assert _racctmgr(c, ["show", "account", "-P", "-n"], None, work).stdout == (
            "root|default root account|root\n")
        c.kill_ctld()
        c.start_ctld()
        assert "bio" not in _racctmgr(c, ["show", "account", "-P"], None, work).stdout


def test_without_the_store_racctmgr_refuses_as_sacctmgr_without_slurmdbd(
        tmp_path: Path) -> None:
    with Cluster(tmp_path / "c", ("n1",)) as c:
        c.start_ctld()
        done = _racctmgr(c, ["list", "account"], None, tmp_path)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == ("You are not running a supported accounting_storage plugin\n"
                               "Only 'accounting_storage/slurmdbd' is supported.\n")
