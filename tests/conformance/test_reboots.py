"""Reboots against real Slurm 22.05 (issue 33): `scontrol reboot ASAP nextstate=RESUME` on a busy
node, `nextstate=DOWN`, `cancel_reboot`, and a reboot that never comes back (ResumeTimeout),
each node's `sinfo` and `scontrol show node` words compared step by step.

Both clusters get the same RebootProgram (tests/conformance/reboot_lab.py): it marks the node,
the daemon stops (shutdown_on_reboot) and the lab starts it again with `-b` (its start is the
node's new boot time). The same script runs on both at once, in two threads.
"""

from __future__ import annotations

import re
import tempfile
import threading
from pathlib import Path

import pytest

from tests.conformance.conftest import _unavailable
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.reboot_lab import RebootLab, wait
from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_missing

RESUME_TIMEOUT = 10
NODES = SHAPE.nodes  # c1, c2


def node_words(cluster, node: str) -> tuple[str, str, str, str]:
    """(sinfo %t, sinfo %T, sinfo %E, scontrol State=) with the reason's text alone."""
    line = cluster.run("sinfo", "-h", "-n", node, "-o", "%t|%T|%E").stdout.strip()
    compact, long_, reason = [*line.split("|", 2), "", "", ""][:3]
    show = cluster.run("scontrol", "show", "node", node, "-o").stdout
    state = re.search(r"\bState=(\S+)", show)
    return compact, long_, reason, state.group(1) if state else "?"


def show_reason(cluster, node: str) -> str:
    """scontrol's NextState= ("-" when none) and Reason= without its [user@time] tail ("-"
    when there is none)."""
    show = cluster.run("scontrol", "show", "node", node, "-o").stdout
    got = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?: \w+=|$)", show)
    nxt = re.search(r"\bNextState=(\S+)", show)
    return f"{nxt.group(1) if nxt else '-'} {got.group(1).strip() if got else '-'}"


def script(cluster, lab: RebootLab) -> list[tuple[str, object]]:
    """The admin's session; every step's observation, in order."""
    seen: list[tuple[str, object]] = []

    def note(step: str, node: str) -> None:
        seen.append((step, (*node_words(cluster, node), show_reason(cluster, node))))

    def compact(node: str) -> str:
        return cluster.run("sinfo", "-h", "-n", node, "-o", "%t").stdout.strip()

    def until(node: str, want: str, timeout: float = 60) -> None:
        wait(lambda: compact(node) == want, timeout, f"{node} {want} on {cluster.name}")

    def busy(node: str, seconds: int) -> None:
        # the whole node: sinfo's alloc/mix of a part-used node is read at a moment of its own
        r = cluster.run("sbatch", "-w", node, "-c", str(SHAPE.cpus), "-o", "/dev/null",
                        "--wrap", f"sleep {seconds}")
        assert r.returncode == 0, r.stderr
        wait(lambda: compact(node) == "alloc", 30, f"{node} busy on {cluster.name}")

    def rc(*argv: str) -> tuple[int, str]:
        r = cluster.run("scontrol", *argv)
        return r.returncode, r.stderr.strip().splitlines()[0] if r.stderr.strip() else ""

    # 1. ASAP, nextstate=RESUME, on a node with a job: it drains, reboots once idle, returns
    busy("c1", 6)
    seen.append(("reboot asap", rc("reboot", "ASAP", "nextstate=RESUME", "reason=new driver",
                                   "c1")))
    note("asap requested", "c1")
    until("c1", "boot^")
    note("asap issued", "c1")
    until("c1", "idle")
    note("asap back", "c1")
    # 2. nextstate=DOWN on an idle node: issued at once, back DOWN "reboot complete"
    seen.append(("reboot down", rc("reboot", "nextstate=DOWN", "c2")))
    until("c2", "boot^")
    note("down issued", "c2")
    until("c2", "down")
    note("down back", "c2")
    seen.append(("resume", rc("update", "nodename=c2", "state=resume")))
    until("c2", "idle")
    # 3. cancel_reboot of a pending reboot; a second one has nothing to cancel
    busy("c1", 4)
    seen.append(("reboot busy", rc("reboot", "c1")))
    note("requested", "c1")
    seen.append(("cancel", rc("cancel_reboot", "c1")))
    note("cancelled", "c1")
    seen.append(("cancel again", rc("cancel_reboot", "c1")))
    # 4. a reboot that never comes back: DOWN "reboot timed out" after ResumeTimeout
    lab.never_returns("c2")
    seen.append(("reboot lost", rc("reboot", "c2")))
    until("c2", "boot^")
    note("lost issued", "c2")
    until("c2", "down", timeout=RESUME_TIMEOUT + 60)
    note("lost timed out", "c2")
    seen.append(("unknown node", rc("reboot", "c9")))
    until("c1", "idle")
    seen.append(("reboots run", dict(lab.reboots)))
    return seen


def _slurm(lab: RebootLab) -> SlurmCluster:
    reason = slurm_missing()
    if reason:
        _unavailable(reason)
    for attempt in range(3):
        slurm = SlurmCluster(SHAPE, extra_conf=lab.conf(RESUME_TIMEOUT), slurmd_args=("-b",),
                             node_env={n: lab.env(n) for n in NODES})
        try:
            slurm.start()
            return slurm
        except SlurmUnavailable as exc:
            slurm.stop()
            if attempt == 2 or "Address already in use" not in str(exc):
                _unavailable(f"a private Slurm could not start: {exc}")
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def sessions() -> dict[str, list]:
    base = Path(tempfile.mkdtemp(prefix="ranch-conformance-reboot-"))
    base.chmod(0o755)
    slurm_lab, ranch_lab = RebootLab(base / "slurm", NODES), RebootLab(base / "ranch", NODES)
    slurm = _slurm(slurm_lab)
    out: dict[str, list] = {}
    errors: list[BaseException] = []
    try:
        with RanchCluster(SHAPE, extra_conf=ranch_lab.conf(RESUME_TIMEOUT), node_args=("-b",),
                          node_env={n: ranch_lab.env(n) for n in NODES}) as ranch:
            slurm_lab.supervise(lambda n: slurm.procs[f"slurmd-{n}"].poll() is not None,
                                slurm.start_slurmd,
                                stop=lambda n: slurm.procs[f"slurmd-{n}"].kill())
            ranch_lab.supervise(lambda n: ranch.cluster.nodes[n].poll() is not None,
                                ranch.start_node)

            def run(name: str, cluster, lab: RebootLab) -> None:
                try:
                    out[name] = script(cluster, lab)
                except BaseException as exc:  # reported below, with its logs
                    errors.append(exc)
                    out[name + " logs"] = [cluster.log_tail()]

            threads = [threading.Thread(target=run, args=("slurm", slurm, slurm_lab)),
                       threading.Thread(target=run, args=("ranch", ranch, ranch_lab))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
            ranch_lab.stop()
    finally:
        slurm_lab.stop()
        slurm.stop()
    if errors:
        raise AssertionError(f"{errors[0]!r}\n" + "\n".join(
            str(v[0])[-3000:] for k, v in out.items() if k.endswith("logs")))
    return out


def test_reboot_states_flags_and_reasons_match_slurm(sessions) -> None:
    slurm, ranch = sessions["slurm"], sessions["ranch"]
    assert [s for s, _ in ranch] == [s for s, _ in slurm]
    for (step, want), (_, got) in zip(slurm, ranch, strict=True):
        assert got == want, f"{step}: Slurm {want}, Ranch {got}"


def test_the_script_saw_what_slurm_documents(sessions) -> None:
    """The oracle itself, so that a change of Slurm's words shows here first."""
    steps = dict(sessions["slurm"])
    assert steps["asap requested"][:4] == ("drng@", "draining@", "new driver",
                                           "ALLOCATED+DRAIN+REBOOT_REQUESTED")
    assert steps["asap issued"][0] == "boot^"
    assert steps["down back"][2] == "reboot requested : reboot issued : reboot complete"
    assert steps["lost timed out"][2].endswith(": reboot timed out")
    assert steps["reboots run"] == {"c1": 1, "c2": 1}
