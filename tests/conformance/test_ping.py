"""`rcontrol ping` held to real Slurm 22.05's `scontrol ping` (issue 32): the same lines and the
same exit code, for the shapes both sides make cheaply from one running controller each: a
SlurmctldHost pair whose backup is down (nothing listens at 127.0.0.2), one controller only,
and both again once the controller is stopped. The commands read the controller list from the
config, so each shape is a config file of its own pointed at the same daemons."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.conformance.conftest import start_slurm
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import Shape
from tests.deadline import scaled

BACKUP = "SlurmctldHost=rbackup(127.0.0.2)\n"  # loopback, where nothing listens: DOWN
ONE_NODE = Shape(nodes=("c1",), cpus=1)


def _ping(cluster, conf: Path, user: bool = False) -> tuple[int, list[str], float, str]:
    """(exit code, stdout's lines, seconds, stderr) of a ping reading `conf`'s controller list, as
    root or (`user`) as nobody."""
    env = cluster.env()
    env.pop("RANCH_SERVER", None)  # the list comes from the config, as an admin's does
    env["SLURM_CONF" if cluster.name == "slurm" else "RANCH_CONF"] = str(conf)
    if user and cluster.name == "ranch":  # the cluster key, as a user given it would hold it
        key = Path(env["RANCH_KEY_FILE"])
        mine = key.with_name("user.key")
        if not mine.exists():
            mine.write_bytes(key.read_bytes())
            mine.chmod(0o400)
            os.chown(mine, 65534, 65534)
        env["RANCH_KEY_FILE"] = str(mine)
    began = time.monotonic()
    who = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if user else []
    done = subprocess.run([*who, *cluster.argv("scontrol", "ping")], env=env, capture_output=True,
                          text=True, timeout=120, cwd=cluster.workdir)
    return done.returncode, done.stdout.splitlines(), time.monotonic() - began, done.stderr


FIRST = "SlurmctldHost=localhost(127.0.0.1)\n"  # both sides' configs open with it


def _confs(pair: Path) -> dict[str, Path]:
    """The pair's config, the same without its backup line, and with the two swapped (the
    primary DOWN, the backup UP), each readable by a user."""
    text = pair.read_text()
    assert text.startswith(FIRST) and BACKUP in text
    made = {"pair": pair}
    for shape, changed in (("one", text.replace(BACKUP, "")),
                           ("swapped", text.replace(BACKUP, "").replace(
                               FIRST, BACKUP.replace("rbackup", "rprimary") + FIRST))):
        made[shape] = path = pair.with_name(f"{pair.stem}-{shape}{pair.suffix}")
        path.write_text(changed)
    for path in made.values():
        path.chmod(0o644)
    for folder in {pair.parent, pair.parent.parent}:
        folder.chmod(0o755)
    return made


def test_ping_as_scontrol() -> None:
    # slurmctld binds its own address (127.0.0.1) rather than every address, as rctld does
    slurm = start_slurm(shape=ONE_NODE,
                        extra_conf=BACKUP + "CommunicationParameters=NoCtldInAddrAny\n")
    try:
        with RanchCluster(ONE_NODE, extra_conf=BACKUP) as ranch:
            confs = {"slurm": _confs(slurm.conf), "ranch": _confs(ranch.cluster.conf_path)}
            seen: dict[str, dict[str, tuple]] = {"slurm": {}, "ranch": {}}
            for who, c in (("slurm", slurm), ("ranch", ranch)):
                for shape, path in confs[who].items():
                    seen[who][f"up, {shape}"] = _ping(c, path)
                seen[who]["up, pair, as a user"] = _ping(c, confs[who]["pair"], user=True)
            ctld = slurm.procs.pop("slurmctld")
            ctld.terminate()
            ctld.wait(30)
            ranch.cluster.stop_ctld()
            for who, c in (("slurm", slurm), ("ranch", ranch)):
                for shape, path in confs[who].items():
                    seen[who][f"down, {shape}"] = _ping(c, path)
                seen[who]["down, one, as a user"] = _ping(c, confs[who]["one"], user=True)
    finally:
        slurm.stop()
    def shown(side: str) -> dict[str, tuple]:  # exit code, stdout's lines, stderr
        return {case: (rc, lines, err) for case, (rc, lines, _t, err) in seen[side].items()}

    assert shown("ranch") == shown("slurm")
    slow = {case: round(t, 1) for case, (*_, t, _e) in seen["ranch"].items() if t > scaled(10)}
    assert not slow, f"a ping took longer than 10 s: {slow}"
