"""examples/healthcheck.sh through the real runner: verdict file, disk and memory checks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ranch.healthcheck.runner import run_health_program

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "healthcheck.sh"


def test_is_executable() -> None:
    assert os.access(SCRIPT, os.X_OK)


@pytest.mark.parametrize(
    ("content", "verdict", "message", "warnings"),
    [
        ("drain bad fan\n", "drain", "HC: bad fan", ()),
        ("fail gpu dead\n", "fail", "HC: gpu dead", ()),
        ("ok\n", "ok", "", ()),
        ("warn fan slow", "ok", "", ("fan slow",)),
    ],
)
async def test_verdict_file(
    tmp_path: Path, monkeypatch, content: str, verdict: str, message: str, warnings: tuple
) -> None:
    verdict_file = tmp_path / "verdict"
    verdict_file.write_text(content)
    monkeypatch.setenv("RANCH_HC_VERDICT_FILE", str(verdict_file))
    report = await run_health_program(
        str(SCRIPT), node_name="n1", node_state="IDLE", is_healthy=True, timeout=30
    )
    assert (report.verdict, report.message, report.warnings) == (verdict, message, warnings)


async def test_verdict_directory_per_node(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "n2").write_text("drain only n2\n")
    monkeypatch.setenv("RANCH_HC_VERDICT_FILE", str(tmp_path))
    reports = [
        await run_health_program(
            str(SCRIPT), node_name=name, node_state="IDLE", is_healthy=True, timeout=30
        )
        for name in ("n1", "n2")
    ]
    assert reports[1].message == "HC: only n2"
    assert reports[0].verdict in ("ok", "drain")  # n1 runs the real checks
    assert reports[0].message != "HC: only n2"


def run_script(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT)], capture_output=True, text=True, timeout=30, check=False,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "RANCH_NODENAME": "n1", **env},
    )


def test_disk_and_memory_thresholds() -> None:
    done = run_script(HC_TMP_MAX_PCT="0", HC_ROOT_MAX_PCT="100")
    assert done.returncode == 1 and done.stdout.startswith("disk /tmp ")
    done = run_script(HC_MIN_FREE_MEM_MB="999999999", HC_ROOT_MAX_PCT="100", HC_TMP_MAX_PCT="100")
    assert done.returncode == 1 and done.stdout.startswith("free memory ")
    done = run_script(HC_MIN_FREE_MEM_MB="1", HC_ROOT_MAX_PCT="100", HC_TMP_MAX_PCT="100")
    assert done.returncode == 0, done.stdout


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has nvidia-smi")
def test_expected_gpus_without_driver_drains() -> None:
    done = run_script(HC_EXPECTED_GPUS="8", HC_ROOT_MAX_PCT="100", HC_TMP_MAX_PCT="100",
                      HC_MIN_FREE_MEM_MB="1")
    assert done.returncode == 1 and "nvidia-smi not found" in done.stdout
