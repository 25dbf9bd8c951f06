"""docs/admin-guide.md, run as written: its marked shell blocks, in order, on three hosts made of
network namespaces (tests/deploy/guidelab.py: ctl1, n001, login1, each with its own /etc, /opt,
/usr/local, /var, /run and host name), from the built wheel, as root's shell; only the guide's
addresses (10.0.0.N) and the node's hardware are replaced. systemctl runs the units from their
files as systemd would (tests/deploy/unitshim.py: rctld as User=ranch under ProtectSystem=full,
its environment only, Type=notify). Between the blocks the test checks what the guide says they
do: the key readable by rctld, the units verified and running as their users, the man pages
found, jobs and steps, the backup table against the state directory, a restore that brings
cancelled jobs back, old logs kept by the rotation, the upgrade steps, `rcontrol reboot` and the
controller host's reboot. Upgrading across versions is test_rolling_upgrade.py's (from the
previous release); here the upgrade steps reinstall this tree's wheel.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from guidelab import NET, GuideLab, blocks
from hosts import export_tree, finish_wheel_build, start_wheel_build, wait_for, why_not
from releases import current

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "admin-guide.md"
HOSTS = {"ctl1": 1, "n001": 11, "login1": 21}
# What the lab's hosts differ in from the guide's: their addresses and the node's hardware.
SUBSTITUTE = (("10.0.0.", f"{NET}."),
              ("NodeName=n[001-064] CPUs=64 RealMemory=256000 Gres=gpu:8",
               "NodeName=n001 CPUs=1 RealMemory=100"),
              ("Nodes=n[001-064]", "Nodes=n001"))
ORDER = ["install", "config", "check", "key", "copy-key", "rctld-unit", "rnoded-unit",
         "first-jobs", "backup", "restore", "logrotate", "rotate", "upgrade-ctld",
         "upgrade-rnoded", "reboot"]

why = why_not()
for tool in ("nsenter", "unshare", "setpriv", "systemd-analyze", "man", "logrotate"):
    if why is None and subprocess.run(["sh", "-c", f"command -v {tool}"],
                                      capture_output=True).returncode != 0:
        why = f"no {tool} here"
pytestmark = [pytest.mark.deploy, pytest.mark.skipif(why is not None, reason=why or "")]


def substitute(text: str) -> str:
    for old, new in SUBSTITUTE:
        text = text.replace(old, new)
    return text


@pytest.fixture
def lab(tmp_path: Path):
    """The wheel (as tests/deploy builds it) and its dependencies' wheels, then the hosts."""
    tree = export_tree(tmp_path / "src")
    wheel = finish_wheel_build(start_wheel_build(tree, tmp_path / "dist"), tmp_path / "dist")
    house = tmp_path / "wheelhouse"
    deps = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "-w", str(house),
                           str(wheel)], capture_output=True, text=True, timeout=600)
    assert deps.returncode == 0, deps.stderr[-3000:]
    lab = GuideLab(tmp_path / "lab", HOSTS, house)
    (lab.work / wheel.name).write_bytes(wheel.read_bytes())
    try:
        lab.up()
        yield lab
    finally:
        lab.down()


class Login:
    """What root sees from login1."""

    def __init__(self, lab: GuideLab) -> None:
        self.host = lab["login1"]

    def run(self, command: str) -> str:
        return self.host.sh(command).stdout

    def node(self) -> dict[str, str]:
        return fields(self.run("rcontrol show node n001"))

    def job(self, job_id: int) -> dict[str, str]:
        return fields(self.run(f"rcontrol show job {job_id}"))

    def node_idle(self) -> bool:
        done = self.host.sh("rinfo -h -N -o '%N %t'", check=False)
        return done.returncode == 0 and done.stdout.split() == ["n001", "idle"]


def fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if sep and key not in out:
            out[key] = value
    return out


def backup_table(guide: str) -> list[tuple[re.Pattern, bool]]:
    """Section 6's rows: (the file's name as a pattern, whether it is always there once the
    cluster ran a job on a node)."""
    section = guide[guide.index("## 6. Backups"):guide.index("## 7.")]
    rows = []
    for line in section.splitlines():
        m = re.match(r"\| `([^`]+)` \|.*\| ([^|]+) \|$", line)
        if m:
            name = re.escape(m[1]).replace("N", r"\d+").replace("YYYYMMDD", r"\d{8}")
            rows.append((re.compile(name + "$"), not m[2].strip().startswith("only")))
    return rows


def test_admin_guide_as_written(lab: GuideLab) -> None:
    t0 = time.monotonic()
    guide = GUIDE.read_text()
    marked = blocks(guide)
    assert [b.name for b in marked] == ORDER, "the guide's marked blocks changed: update ORDER"
    login = Login(lab)
    held: list[int] = []
    outputs: dict[str, str] = {}
    for block in marked:
        if block.name == "backup":  # jobs the backup holds, cancelled before the restore
            held = [int(login.run("rbatch -H --parsable --wrap true")) for _ in range(2)]
        for name in block.hosts:
            if block.file is not None:
                lab[name].write(block.file, substitute(block.text))
            else:
                outputs[block.name] = lab[name].sh(substitute(block.text)).stdout
        check_after(block.name, lab, login, held, guide, outputs)
    print(f"admin guide: {time.monotonic() - t0:.1f} s after the wheels were built")


def check_after(name: str, lab: GuideLab, login: Login, held: list[int], guide: str,
                outputs: dict[str, str]) -> None:
    ctl, node = lab["ctl1"], lab["n001"]
    if name == "install":
        for h in lab.hosts.values():
            where = h.sh("man -w rctld; command -v rctld; rctld --version").stdout.split()
            assert where[0].endswith("/rctld.8") and where[1] == "/usr/local/bin/rctld", where
            assert where[-1] == current(), where
    elif name == "copy-key":
        assert ctl.sh("stat -c %U:%a /etc/ranch/ranch.key").stdout.split() == ["ranch:600"]
        for h in (node, lab["login1"]):
            assert h.sh("stat -c %U:%a /etc/ranch/ranch.key").stdout.split() == ["root:600"]
    elif name == "rctld-unit":
        pid = ctl.sh("cat /run/rag-systemd/rctld.service.pid").stdout.strip()
        assert ctl.sh(f"stat -c %U /proc/{pid}").stdout.split() == ["ranch"]
        state = ctl.sh("stat -c %U:%a /var/lib/ranch /var/log/ranch").stdout.split()
        assert state == ["ranch:700", "ranch:755"], state
    elif name == "rnoded-unit":
        wait_for("n001 registered and idle", login.node_idle)
        info = login.node()
        assert info["Version"] == current(), info
    elif name == "first-jobs":
        said = outputs[name].split()  # rinfo's table, rrun's host name, rbatch's answer
        assert said[-5:-1] == ["n001", "Submitted", "batch", "job"], outputs[name]
        job_id = int(outputs[name].split()[-1])
        out = lab.work / f"slurm-{job_id}.out"
        wait_for("the batch job's output", lambda: out.exists() and out.read_text() == "n001\n")
    elif name == "backup":
        listed = ctl.sh("tar -tzf /var/backups/ranch/state.tar.gz").stdout.split()
        files = [f.removeprefix("ranch/") for f in listed if not f.endswith("/")]
        rows = backup_table(guide)
        unlisted = [f for f in files if not any(p.match(f) for p, _ in rows)]
        assert unlisted == [], f"in StateSaveLocation, not in the guide's table: {unlisted}"
        missing = [p.pattern for p, always in rows
                   if always and not any(p.match(f) for f in files)]
        assert missing == [], f"in the guide's table, not in StateSaveLocation: {missing} ({files})"
        for job_id in held:
            login.run(f"rcancel {job_id}")
            assert login.job(job_id)["JobState"] == "CANCELLED"
    elif name == "restore":
        for job_id in held:
            info = login.job(job_id)
            assert info["JobState"] == "PENDING", info
        wait_for("n001 back after the restore", login.node_idle)
    elif name == "rotate":
        logs = "/var/log/ranch"
        assert "rctld.log.1" in ctl.sh(f"ls {logs}").stdout.split()
        # the daemon reopened its file (SIGUSR2 from postrotate): its next line lands there
        wait_for("rctld writes the new rctld.log",
                 lambda: ctl.sh(f"test -s {logs}/rctld.log", check=False).returncode == 0)
        ctl.sh("logrotate -f /etc/logrotate.d/ranch")
        kept = ctl.sh(f"ls {logs}").stdout.split()
        assert {"rctld.log", "rctld.log.1", "rctld.log.2.gz"} <= set(kept), kept
    elif name == "upgrade-ctld":
        assert login.run("rcontrol ping").strip().endswith(" is UP")
        assert all(login.job(j)["JobState"] == "PENDING" for j in held)
    elif name == "upgrade-rnoded":
        wait_for("n001 back after its upgrade", login.node_idle)
        assert login.node()["Version"] == current()
    elif name == "reboot":
        before = login.node()["BootTime"]
        marker = lab.dir / "reboot-requested.n001"
        wait_for("rnoded ran RebootProgram", marker.exists)
        node.power_off()
        node.boot()
        wait_for("n001 back in service after its reboot", login.node_idle)
        after = login.node()
        assert after["BootTime"] != before, (before, after)
        assert "DRAIN" not in after["State"], after
        # the controller host reboots: rctld stopped by SIGTERM, started again at boot
        ctl.power_off()
        ctl.boot()
        wait_for("rctld back after its host's reboot",
                 lambda: login.host.sh("rcontrol ping", check=False).returncode == 0)
        assert all(login.job(j)["JobState"] == "PENDING" for j in held)
        wait_for("n001 back with the rebooted controller", login.node_idle)
