"""Every flag of `python -m ranch.healthcheck`, mostly in-process through main(); a few real
runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ranch.healthcheck.__main__ import main
from ranch.healthcheck.kernlog import read_kmsg
from ranch.healthcheck.xid import XID_TABLE

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_fake_env(monkeypatch) -> None:
    monkeypatch.delenv("RANCH_FAKE_GPUS", raising=False)
    monkeypatch.delenv("RANCH_FAKE_GPU_FAULTS", raising=False)


def hc(capsys, *argv: str) -> tuple[int, list[str]]:
    code = main(list(argv))
    return code, capsys.readouterr().out.splitlines()


def faults(tmp_path: Path, monkeypatch, data: dict) -> Path:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps(data))
    monkeypatch.setenv("RANCH_FAKE_GPU_FAULTS", str(path))
    return path


def test_no_checks_passes_quietly(capsys) -> None:
    assert hc(capsys) == (0, [])


def test_disk(capsys, tmp_path: Path) -> None:
    assert hc(capsys, "--disk", f"{tmp_path}:100%") == (0, [])
    code, out = hc(capsys, "--disk", f"{tmp_path}:100%", "--disk", f"{tmp_path}:0%")
    assert code == 1 and out[0].startswith(f"disk {tmp_path} ") and "(max 0%)" in out[0]
    code, out = hc(capsys, "--disk", f"{tmp_path}/missing:90%")
    assert code == 1 and "missing" in out[0]


@pytest.mark.parametrize("spec", ["nocolon", "/tmp:lots", "/tmp:150%"])
def test_bad_flags_drain_not_fail(capsys, spec: str) -> None:
    code, out = hc(capsys, "--disk", spec)
    assert code == 1 and "--disk" in out[0]
    code, out = hc(capsys, "--frobnicate")
    assert code == 1 and "frobnicate" in out[0]


def test_min_free_mem(capsys) -> None:
    assert hc(capsys, "--min-free-mem", "1K") == (0, [])
    code, out = hc(capsys, "--min-free-mem", "1P")
    assert code == 1 and out[0].startswith("free memory ") and out[0].endswith("below 1024.0T")
    code, out = hc(capsys, "--min-free-mem", "lots")
    assert code == 1 and "bad size" in out[0]


def test_max_load(capsys) -> None:
    assert hc(capsys, "--max-load", "1000") == (0, [])
    code, out = hc(capsys, "--max-load", "-1")  # a load average is never negative
    assert code == 1 and out[0].startswith("load ") and out[0].endswith("above -1")


def test_fake_gpus_count(capsys, tmp_path: Path, monkeypatch) -> None:
    assert hc(capsys, "--fake-gpus", "4", "--gpus", "4") == (0, [])
    faults(tmp_path, monkeypatch, {"missing": 1})
    assert hc(capsys, "--fake-gpus", "4", "--gpus", "4") == (1, ["expected 4 GPUs, found 3"])


def test_fake_gpus_from_environment(capsys, monkeypatch) -> None:
    monkeypatch.setenv("RANCH_FAKE_GPUS", "2")
    assert hc(capsys, "--gpus", "4") == (1, ["expected 4 GPUs, found 2"])
    monkeypatch.setenv("RANCH_FAKE_GPUS", "two")
    code, out = hc(capsys)
    assert code == 1 and "RANCH_FAKE_GPUS" in out[0]


def test_fatal_xid_fails_naming_it(capsys, tmp_path: Path, monkeypatch) -> None:
    faults(tmp_path, monkeypatch, {"xids": [{"gpu": 0, "xid": 79}], "missing": 1})
    code, out = hc(capsys, "--fake-gpus", "4", "--gpus", "4")
    assert code == 2
    assert out[0] == "GPU 0000:18:00 XID 79: GPU has fallen off the bus"
    assert out[1] == "expected 4 GPUs, found 3"


def test_other_xid_warns(capsys, tmp_path: Path, monkeypatch) -> None:
    faults(tmp_path, monkeypatch, {"xids": [{"gpu": 1, "xid": 31}]})
    code, out = hc(capsys, "--fake-gpus", "4")
    assert code == 0
    assert out == [
        "WARNING: GPU 0000:2a:00 XID 31: GPU memory page fault (usually an application fault)"
    ]


def test_no_xid_skips_xid_check(capsys, tmp_path: Path, monkeypatch) -> None:
    faults(tmp_path, monkeypatch, {"xids": [{"gpu": 0, "xid": 79}]})
    assert hc(capsys, "--fake-gpus", "2", "--no-xid") == (0, [])


def test_gpu_max_temp_warns(capsys, tmp_path: Path, monkeypatch) -> None:
    faults(tmp_path, monkeypatch, {"temps": {"2": 95}})
    assert hc(capsys, "--fake-gpus", "4", "--gpu-max-temp", "90") == (0, ["WARNING: gpu2 at 95C"])
    assert hc(capsys, "--fake-gpus", "4", "--gpu-max-temp", "99") == (0, [])


def test_nvml_error_drains(capsys, tmp_path: Path, monkeypatch) -> None:
    faults(tmp_path, monkeypatch, {"nvml_error": "Unknown Error"})
    assert hc(capsys, "--fake-gpus", "4") == (1, ["NVML: Unknown Error"])


def test_broken_faults_file_drains(capsys, tmp_path: Path, monkeypatch) -> None:
    path = faults(tmp_path, monkeypatch, {})
    path.write_text("{not json")
    code, out = hc(capsys, "--fake-gpus", "4")
    assert code == 1 and str(path) in out[0]


def test_faults_file_is_read_on_every_run(capsys, tmp_path: Path, monkeypatch) -> None:
    path = faults(tmp_path, monkeypatch, {"xids": [{"gpu": 0, "xid": 48}]})
    assert hc(capsys, "--fake-gpus", "1")[0] == 2
    path.unlink()
    assert hc(capsys, "--fake-gpus", "1") == (0, [])


def test_kernel_log_window_and_state(capsys, tmp_path: Path) -> None:
    now = time.time()
    log = tmp_path / "kern.log"
    log.write_text(
        f"{now - 7200:.6f} h kernel: NVRM: Xid (PCI:0000:3b:00): 95, pid=1, name=a, old\n"
        f"{now - 30:.6f} h kernel: NVRM: Xid (PCI:0000:3b:00): 43, pid=1, name=a, stopped\n"
    )
    args = ("--xid", "--kernel-log", str(log), "--fake-gpus", "1")
    code, out = hc(capsys, *args)
    assert code == 0
    assert out == ["WARNING: GPU 0000:3b:00 XID 43: " + XID_TABLE[43].meaning]
    code, out = hc(capsys, *args, "--xid-window", "9000")
    if code == 2:  # boot older than two hours: the old XID 95 is in the window now
        assert out[0].startswith("GPU 0000:3b:00 XID 95: uncontained ECC error")
    state = tmp_path / "xid.state"
    assert hc(capsys, *args, "--xid-state", str(state))[1] != []
    assert hc(capsys, *args, "--xid-state", str(state)) == (0, [])  # reported once only
    assert "seen" in json.loads(state.read_text())
    code, out = hc(capsys, "--xid", "--kernel-log", str(tmp_path / "none.log"), "--fake-gpus", "1")
    assert code == 1 and "none.log" in out[0]


def test_fatal_xid_is_not_silenced_by_state(capsys, tmp_path: Path, monkeypatch) -> None:
    faults(tmp_path, monkeypatch, {"xids": [{"gpu": 0, "xid": 79}, {"gpu": 0, "xid": 13}]})
    state = str(tmp_path / "state")
    code, out = hc(capsys, "--fake-gpus", "1", "--xid-state", state)
    assert code == 2 and len(out) == 2 and out[1].startswith("WARNING: GPU 0000:18:00 XID 13")
    code, out = hc(capsys, "--fake-gpus", "1", "--xid-state", state)
    assert code == 2 and len(out) == 1


def test_kmsg_read_does_not_block() -> None:
    lines = read_kmsg()
    assert lines is None or isinstance(lines, list)


def run_module(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO), **env}
    return subprocess.run(
        [sys.executable, "-m", "ranch.healthcheck", *argv],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=60, check=False,
    )


def test_real_process_exit_codes(tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"xids": [{"gpu": 2, "xid": 79}]}))
    env = {"RANCH_FAKE_GPUS": "4", "RANCH_FAKE_GPU_FAULTS": str(path)}
    done = run_module("--gpus", "4", "--disk", f"{tmp_path}:100%", env=env)
    assert done.returncode == 2
    assert done.stdout.splitlines()[0] == "GPU 0000:3a:00 XID 79: GPU has fallen off the bus"
    path.write_text("{}")
    done = run_module("--gpus", "4", env=env)
    assert (done.returncode, done.stdout) == (0, "")
