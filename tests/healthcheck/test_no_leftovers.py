"""Programs never outlive their run: health checks and power programs whose children escape the
process group (`setsid`, double forks) leave nothing behind, in every run (issue 18)."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

import trio

from ranch.ctld.programs import run_program
from ranch.healthcheck.runner import run_health_program_detailed

RUNS = 24


def script(tmp_path: Path, body: str, name: str = "hc.sh") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def processes_with(tag: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `tag`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if tag.encode() not in f.read():
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


async def health(program: str, timeout: float = 20.0):
    return await run_health_program_detailed(
        program, node_name="n1", node_state="IDLE", is_healthy=True, timeout=timeout,
        kill_grace=0.2)


async def test_setsid_children_of_a_health_check_are_gone_after_every_run(tmp_path) -> None:
    # The leak: `setsid sleep 1000` outlived 4 runs of 27. Each run here leaves its
    # escapee a distinct sleep length, so any survivor is found by its command line.
    tag = f"1000.{secrets.randbelow(10**6):06d}"
    shapes = (
        "setsid sleep {t} &\necho started\nexit 0\n",  # the program
        "setsid sleep {t} &\nexit 1\n",  # a failing check
        "(setsid sleep {t} &) &\necho daemonised\nexit 0\n",  # double fork
        "setsid sh -c 'sleep {t} </dev/null >/dev/null 2>&1 &' &\nsleep 0.01\nexit 2\n",
    )
    leaked = []
    for i in range(RUNS):
        secs = f"{tag}{i:02d}"
        run = await health(script(tmp_path, shapes[i % len(shapes)].format(t=secs)))
        assert not run.timed_out and run.returncode in (0, 1, 2), run
        left = processes_with(secs)
        leaked += left
        kill_all(left)
    assert leaked == [], f"{len(leaked)} of {RUNS} runs left a process behind"


async def test_setsid_children_are_gone_after_a_timeout_and_a_cancel(tmp_path) -> None:
    tag = f"1001.{secrets.randbelow(10**6):06d}"
    prog = script(tmp_path, f"setsid sleep {tag}1 &\nsleep 30\n")
    run = await health(prog, timeout=0.3)
    assert run.timed_out and run.report.message == "HC: timed out after 0.3 s"
    assert processes_with(f"{tag}1") == []
    prog = script(tmp_path, f"setsid sleep {tag}2 &\necho x\nsleep 30\n", "cancel.sh")
    with trio.move_on_after(0.5):
        await health(prog, timeout=60)
    left = processes_with(f"{tag}2")
    kill_all(left)
    assert left == [], "a cancelled check took its setsid child along"


async def test_power_program_tree_is_killed_at_its_timeout(tmp_path) -> None:
    tag = f"1002.{secrets.randbelow(10**6):06d}"
    prog = script(tmp_path, f"setsid sleep {tag} &\necho started\nsleep 30\n", "resume.sh")
    result = await run_program("resume", prog, "n1", conf_path="/t.conf", timeout=0.5)
    assert result.timed_out and result.returncode == -9 and "started" in result.output
    left = processes_with(tag)
    kill_all(left)
    assert left == []


async def test_power_program_keeps_a_detached_daemon_but_not_what_holds_its_output(
        tmp_path) -> None:
    # A ResumeProgram may start a daemon, as examples/resume.sh starts rnoded (its own output,
    # not rctld's pipe): that one is left running, as Slurm leaves it. A child still holding
    # the program's output is part of the run and ends with it.
    tag = f"1003.{secrets.randbelow(10**6):06d}"
    prog = script(tmp_path,
                  f"setsid sleep {tag}1 </dev/null >/dev/null 2>&1 &\n"
                  f"setsid sleep {tag}2 &\necho done\nexit 0\n", "resume.sh")
    with trio.fail_after(10):  # the pipe-holding child must not keep rctld waiting
        result = await run_program("resume", prog, "n1", conf_path="/t.conf", timeout=30)
    assert result.returncode == 0 and "done" in result.output
    daemon, holder = processes_with(f"{tag}1"), processes_with(f"{tag}2")
    kill_all(daemon + holder)
    assert len(daemon) == 1, "the detached daemon was killed"
    assert holder == [], "the child holding the output pipe outlived the program"
