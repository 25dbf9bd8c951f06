"""run_health_program against real scripts: exit codes, signals, timeout, output bound, env."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import trio

from ranch.healthcheck.runner import run_health_program, run_health_program_detailed


def script(tmp_path: Path, body: str, name: str = "hc.sh") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def run(program: str, timeout: float = 20.0, **kw):
    return await run_health_program_detailed(
        program, node_name="n1", node_state="IDLE", is_healthy=True, timeout=timeout, **kw
    )


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"  # zombie: dead, unreaped
    except FileNotFoundError:
        return True


async def wait_gone(pid: int) -> bool:
    with trio.move_on_after(10):
        while not gone(pid):
            await trio.sleep(0.05)
    return gone(pid)


async def test_exit_zero_is_ok_with_warnings(tmp_path: Path) -> None:
    prog = script(tmp_path, "echo fine\necho 'WARNING: gpu2 at 91C'\necho 'WARNING:  fan slow '\n")
    report = await run_health_program(
        prog, node_name="n1", node_state="IDLE", is_healthy=None, timeout=20
    )
    assert report.verdict == "ok"
    assert report.message == ""
    assert report.warnings == ("gpu2 at 91C", "fan slow")
    assert report.ran_at > 1e9


async def test_exit_one_drains_with_first_nonempty_line(tmp_path: Path) -> None:
    run_ = await run(script(tmp_path, "echo\necho '  bad fan  '\necho second\nexit 1\n"))
    assert (run_.report.verdict, run_.report.message) == ("drain", "HC: bad fan")
    assert run_.returncode == 1
    assert "second" in run_.output


async def test_exit_two_fails(tmp_path: Path) -> None:
    run_ = await run(script(tmp_path, "echo gpu dead >&2\nexit 2\n"))
    assert (run_.report.verdict, run_.report.message) == ("fail", "HC: gpu dead")


async def test_other_exit_without_output_drains_with_status(tmp_path: Path) -> None:
    run_ = await run(script(tmp_path, "exit 3\n"))
    assert (run_.report.verdict, run_.report.message) == ("drain", "HC: exited with status 3")


async def test_signal_drains_naming_it(tmp_path: Path) -> None:
    run_ = await run(script(tmp_path, "kill -KILL $$\n"))
    assert run_.returncode == -9
    assert (run_.report.verdict, run_.report.message) == ("drain", "HC: killed by signal SIGKILL")


async def test_timeout_kills_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    prog = script(tmp_path, f"sleep 300 &\necho $! > {pidfile}\necho started\nwait\n")
    run_ = await run(prog, timeout=0.5, kill_grace=0.5)
    assert run_.timed_out
    assert (run_.report.verdict, run_.report.message) == ("drain", "HC: timed out after 0.5 s")
    assert "started" in run_.output
    assert await wait_gone(int(pidfile.read_text()))


async def test_timeout_escalates_to_sigkill(tmp_path: Path) -> None:
    prog = script(tmp_path, "trap '' TERM\necho stubborn\nwhile :; do sleep 0.1; done\n")
    run_ = await run(prog, timeout=0.3, kill_grace=0.3)
    assert run_.report.message == "HC: timed out after 0.3 s"
    assert run_.returncode == -9


async def test_leftover_background_children_are_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    # The background sleep keeps the output pipe open; the run must not wait for it.
    prog = script(tmp_path, f"sleep 300 &\necho $! > {pidfile}\nexit 0\n")
    run_ = await run(prog, timeout=30)
    assert run_.report.verdict == "ok"
    assert not run_.timed_out
    assert await wait_gone(int(pidfile.read_text()))


async def test_cancelled_caller_kills_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "gc.pid"
    prog = script(tmp_path, f"sleep 300 &\necho $! > {pidfile}\nwait\n")
    with trio.move_on_after(1.0):
        await run(prog, timeout=60)
    assert await wait_gone(int(pidfile.read_text()))


async def test_output_is_bounded_and_drained(tmp_path: Path) -> None:
    body = "head -c 2000000 /dev/zero | tr '\\000' x\necho\necho done >&2\nexit 1\n"
    prog = script(tmp_path, body)
    run_ = await run(prog, output_limit=1000)
    assert run_.returncode == 1  # the writer was never blocked on a full pipe
    assert run_.truncated
    assert len(run_.output) == 1000
    assert run_.report.verdict == "drain"
    assert run_.report.message.startswith("HC: xxx")
    assert len(run_.report.message) <= 256


async def test_clean_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RANCH_TEST_LEAK", "secret")
    monkeypatch.setenv("RANCH_FAKE_GPUS", "3")
    monkeypatch.delenv("RANCH_FAKE_GPU_FAULTS", raising=False)
    prog = script(tmp_path, "env\n")
    run_ = await run_health_program_detailed(
        prog, node_name="gpu07", node_state="MIXED+DRAIN", is_healthy=False, timeout=20
    )
    env = dict(line.split("=", 1) for line in run_.output.splitlines() if "=" in line)
    assert env["RANCH_NODENAME"] == "gpu07"
    assert env["SLURMD_NODENAME"] == "gpu07"
    assert env["RANCH_NODE_STATE"] == "MIXED+DRAIN"
    assert env["RANCH_NODE_IS_HEALTHY"] == "no"
    assert env["RANCH_FAKE_GPUS"] == "3"
    assert env["PATH"] == "/usr/sbin:/usr/bin:/sbin:/bin"
    assert "RANCH_TEST_LEAK" not in env
    assert "RANCH_FAKE_GPU_FAULTS" not in env
    assert "HOME" not in env


async def test_is_healthy_unset_at_startup(tmp_path: Path) -> None:
    prog = script(tmp_path, 'echo "h=${RANCH_NODE_IS_HEALTHY-unset}"\n')
    run_ = await run_health_program_detailed(
        prog, node_name="n1", node_state="UNKNOWN", is_healthy=None, timeout=20
    )
    assert run_.output.strip() == "h=unset"


async def test_missing_program_drains_naming_path(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.sh")
    run_ = await run(missing)
    assert run_.report.verdict == "drain"
    assert missing in run_.report.message
    assert run_.returncode is None


async def test_not_executable_drains(tmp_path: Path) -> None:
    path = tmp_path / "plain.sh"
    path.write_text("#!/bin/sh\nexit 0\n")
    os.chmod(path, 0o644)
    run_ = await run(str(path))
    assert run_.report.verdict == "drain"
    assert str(path) in run_.report.message
    assert "ermission" in run_.report.message


async def test_program_with_arguments(tmp_path: Path) -> None:
    prog = script(tmp_path, 'echo "got $1"\nexit 1\n')
    run_ = await run(f"{prog} --disk")
    assert run_.report.message == "HC: got --disk"


async def test_output_is_logged(tmp_path: Path, caplog) -> None:
    prog = script(tmp_path, 'echo "gpu3 missing"\necho "detail line" >&2\nexit 1\n')
    with caplog.at_level("INFO", logger="rnoded.healthcheck"):
        report = await run_health_program(
            prog, node_name="n1", node_state="IDLE", is_healthy=True, timeout=20
        )
    assert report.message == "HC: gpu3 missing"
    (record,) = [r for r in caplog.records if r.name == "rnoded.healthcheck"]
    text = record.getMessage()
    assert "drain" in text and "gpu3 missing" in text and "detail line" in text
