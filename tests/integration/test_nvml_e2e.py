"""A real GPU through NVML, end to end: rnoded without --fake-gpus, a job's --gpus, a step's
--gpus-per-task, and the built-in health check. Skips where no NVIDIA driver answers (CI has none;
it runs on a lent GPU machine: `pytest tests/integration/test_nvml_e2e.py`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .test_jobs_e2e import job_state, jobs_cluster, start, submit

RRUN = f"{sys.executable} -m ranch.cli.rrun"


def _nvml_gpus() -> list[dict]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no library, no driver, no device: nothing to test here
        pytest.skip(f"no NVML driver answers here ({exc.__class__.__name__}: {exc})")
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid = pynvml.nvmlDeviceGetUUID(h)
            gpus.append({"uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                         "mib": pynvml.nvmlDeviceGetMemoryInfo(h).total >> 20})
        return gpus
    finally:
        pynvml.nvmlShutdown()


@pytest.fixture
def gpus() -> list[dict]:
    found = _nvml_gpus()
    if not found:
        pytest.skip("NVML answers but sees no GPU")
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no nvidia-smi to look from inside the job")
    return found


def test_nvml_node_job_and_step_see_the_real_gpus(tmp_path: Path, gpus: list[dict]) -> None:
    n = len(gpus)
    c = jobs_cluster(tmp_path, ["g1"], cpus=1, gpus=n)
    c.fake_gpus = 0  # type: ignore[attr-defined]  # the node reads NVML, as on a real cluster
    try:
        start(c)  # IDLE only if the GPUs NVML reports match Gres=gpu:N
        seen = c.wait_for(lambda: (c.snapshot(metrics=True)["g1"]["metrics"] or {}).get("gpus"),
                          30, what="a heartbeat with NVML's metrics")
        assert len(seen) == n, seen
        assert [g["mem_total_mib"] for g in seen] == [g["mib"] for g in gpus], seen

        out = c.dir / "out.txt"
        jid = submit(c, "-N1", "--gpus=1", "-o", str(out), "--wrap",
                     "echo job=$CUDA_VISIBLE_DEVICES; "
                     f"{RRUN} -n1 --gpus-per-task=1 sh -c 'echo task=$CUDA_VISIBLE_DEVICES; "
                     "nvidia-smi --query-gpu=uuid --format=csv,noheader'; echo rc=$?")
        c.wait_for(lambda: job_state(c, jid) == "COMPLETED", 120, what="job COMPLETED")
        lines = out.read_text().splitlines()
        assert lines[0] == "job=0", lines
        assert lines[1] == "task=0", lines
        # the task's CUDA_VISIBLE_DEVICES narrows the driver's view to the one GPU it was given
        assert lines[2:-1] == [gpus[0]["uuid"]], lines
        assert lines[-1] == "rc=0", lines
    finally:
        c.stop()


def test_builtin_health_check_counts_the_real_gpus(gpus: list[dict]) -> None:
    n = len(gpus)
    ok = subprocess.run([sys.executable, "-m", "ranch.healthcheck", f"--gpus={n}",
                         "--gpu-max-temp=95",
                         "--no-xid"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    short = subprocess.run([sys.executable, "-m", "ranch.healthcheck", f"--gpus={n + 1}",
                            "--no-xid"],
                           capture_output=True, text=True, timeout=60)
    assert short.returncode == 1, short.stdout + short.stderr  # drain: a GPU is missing
    assert str(n) in short.stdout.splitlines()[0], short.stdout
