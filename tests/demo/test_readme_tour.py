"""docs/tour.md, run as written: `make demo` in one terminal, then every line of the second
terminal's block in one bash, in order, each of which must succeed."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.demo.running import GONE_WITHIN, REPO, RunningDemo, clean_env, wait_for

TOUR = REPO / "docs" / "tour.md"


def tour_blocks() -> list[list[str]]:
    """The ```sh blocks of docs/tour.md, as lists of lines."""
    section = TOUR.read_text()
    return [block.strip().splitlines() for block in re.findall(r"```sh\n(.*?)```", section,
                                                               re.DOTALL)]


def as_script(lines: list[str]) -> str:
    """Each line echoed, then run; the first that fails stops the script (`set -e`, and
    `pipefail` for `curl | grep`)."""
    out = ["set -eo pipefail"]
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            out += [f"printf '\\n%s\\n' {shlex.quote('+ ' + line)}", line]
    return "\n".join(out) + "\n"


def checkout_like(where: Path) -> None:
    """`where` looks like the checkout to make and to the tour (its own ./demo-run, so a demo
    someone runs in the real checkout is left alone): the Makefile, examples/ and .venv are
    links to ours."""
    for name in ("Makefile", "examples"):
        (where / name).symlink_to(REPO / name)
    (where / ".venv").symlink_to(sys.prefix)


def test_readme_tour_runs_as_written(tmp_path: Path) -> None:
    if not (Path(sys.prefix) / "bin" / "activate").exists():
        pytest.skip("the tour sources .venv/bin/activate: run the tests from a venv (make test)")
    if not shutil.which("make") or not shutil.which("bash") or not shutil.which("curl"):
        pytest.skip("the tour needs make, bash and curl")
    first, *rest = tour_blocks()
    assert first == ["make demo"], first
    assert rest, "the tour has no second-terminal block"
    lines = [line for block in rest for line in block]
    assert lines[0].startswith("source .venv/bin/activate "), lines[0]  # commands on PATH
    assert lines[1].startswith("source demo-run/env "), lines[1]  # this demo's address, ...
    assert lines[2].startswith('cd "$RANCH_DEMO_DIR" '), lines[2]  # its directory: job output

    checkout_like(tmp_path)
    # DEMO_STAMP= : the demo target without its install prerequisite (the venv is ours, installed)
    demo = RunningDemo(tmp_path, ["make", "--no-print-directory", "demo", "DEMO_STAMP="])
    try:
        env = demo.wait_up()
        # A new terminal: the venv's commands are on PATH only once the tour activates it.
        venv_bin = str(Path(sys.prefix) / "bin")
        path = os.pathsep.join(p for p in os.environ.get("PATH", os.defpath).split(os.pathsep)
                               if p and os.path.abspath(p) != venv_bin)
        done = subprocess.run(["bash", "-c", as_script(lines)], cwd=tmp_path,
                              env=clean_env(PATH=path), capture_output=True, text=True,
                              timeout=300)
        out = done.stdout
        assert done.returncode == 0, (
            f"the tour stopped at its last line below (exit {done.returncode}):\n"
            f"{out[-6000:]}\n--- stderr ---\n{done.stderr[-3000:]}")
        assert "error" not in done.stderr, done.stderr

        # A healthy cluster: every node the demo started is up, the rest are what the config
        # says (CLOUD nodes powered down, FUTURE ones not in service), /metrics agrees.
        listing = out.split("+ rinfo  ", 1)[1].split("\n+ ", 1)[0]
        assert re.search(r"gpu\*\s+up .* 4\s+idle gpu\[01-04\]", listing), listing
        assert re.search(r"cpu\s+up .* 8\s+idle cpu\[01-08\]", listing), listing
        assert re.search(r"cloud\s+up .* 4\s+idle~ cloud\[01-04\]", listing), listing
        for zero in ("down", "unknown", "noresp", "fail"):
            assert f"\nslurm_nodes_{zero} 0\n" in out, zero
        assert "\nslurm_nodes_future 2\n" in out

        # `rcontrol show config` shows what rctld runs with, not the file's defaults.
        port = env["RANCH_SERVER"].rsplit(":", 1)[1]
        assert re.search(rf"\nSlurmctldPort\s+= {port}\n", out)
        assert re.search(rf"\nAuthKeyFile\s+= {re.escape(env['RANCH_KEY_FILE'])}\n", out)
        assert re.search(rf"\nStateSaveLocation\s+= {re.escape(str(demo.dir))}/state\n", out)

        for n in (1, 2, 3, 6):  # the array's tasks take ids 3-5
            assert f"Submitted batch job {n}\n" in out, n
        # The jobs ran in the demo's directory (the tour cd's there), not in the checkout.
        wait_for(lambda: (demo.dir / "slurm-1.out").exists(), 60, "job 1's output file")
        assert (demo.dir / "hello-2.out").exists(), sorted(os.listdir(demo.dir))
        assert not [p.name for p in tmp_path.glob("*.out") if p != demo.out]
    finally:
        if demo.proc.poll() is None:  # Ctrl-C in the first terminal
            os.killpg(demo.proc.pid, signal.SIGINT)
            demo.proc.wait(GONE_WITHIN)
        try:
            assert not demo.survivors(), demo.output()
            assert not demo.link.exists() and not demo.link.is_symlink()
        finally:
            demo.kill_all()
