"""`python -m ranch.healthcheck` / `ranch-healthcheck`: a ready HealthCheckProgram.

Exit 0 healthy (warnings printed as "WARNING: ..." lines), 1 drain, 2 fail (hardware fault); the
first output line is the reason. Bad flags exit 1 too: a broken check must not pass for a healthy
node, and exit 2 is kept for hardware.

XIDs: fatal codes (see ranch.healthcheck.xid) give exit 2 while they are inside --xid-window and
newer
than the last boot; other codes are warnings. With --xid-state FILE a non-fatal XID event warns
on one run only. Events come from NVML (critical-XID events raised during a short wait) and from
the kernel log: /dev/kmsg, else `journalctl -k`, else /var/log/kern.log (or --kernel-log FILE).
Fake GPUs (RANCH_FAKE_GPUS=N or --fake-gpus N) replace NVML and the kernel log; faults come from
the JSON file named by RANCH_FAKE_GPU_FAULTS, read on every run:
{"xids": [{"gpu": 0, "xid": 79}], "temps": {"2": 91}, "missing": 1, "nvml_error": "..."}.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import NoReturn, TextIO

from ranch.healthcheck import checks
from ranch.healthcheck.checks import DRAIN, FAIL, WARNING, Finding
from ranch.healthcheck.gpu import FAKE_FAULTS_ENV, FAKE_GPUS_ENV, GpuView, fake_view, nvml_view
from ranch.healthcheck.kernlog import read_kernel_log

EXIT_OK, EXIT_DRAIN, EXIT_FAIL = 0, 1, 2


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="ranch-healthcheck",
        description="Node health check for Ranch: exit 0 ok, 1 drain, 2 fail.",
    )
    p.add_argument("--disk", action="append", default=[], metavar="PATH:MAX%",
                   help="drain when PATH's filesystem is fuller than MAX%% (repeatable)")
    p.add_argument("--min-free-mem", metavar="SIZE",
                   help="drain when available memory is below SIZE (K/M/G/T; bare number MiB)")
    p.add_argument("--max-load", type=float, metavar="N",
                   help="drain when the 1-minute load average is above N")
    p.add_argument("--gpus", type=int, metavar="N", help="drain unless exactly N GPUs are visible")
    p.add_argument("--gpu-max-temp", type=float, metavar="C",
                   help="warn about every GPU hotter than C degrees Celsius")
    p.add_argument("--xid", dest="xid", action="store_true", default=None,
                   help="check XIDs even without other GPU flags")
    p.add_argument("--no-xid", dest="xid", action="store_false", help="skip the XID check")
    p.add_argument("--xid-window", type=float, default=3600.0, metavar="SECONDS",
                   help="only kernel-log XIDs this recent count (default 3600)")
    p.add_argument("--xid-state", metavar="FILE",
                   help="remember reported non-fatal XIDs here, so each warns once")
    p.add_argument("--kernel-log", metavar="FILE",
                   help="read XID lines from this file instead of kmsg/journal/kern.log")
    p.add_argument("--fake-gpus", type=int, metavar="N",
                   help=f"pretend N GPUs exist, no NVML (also ${FAKE_GPUS_ENV})")
    p.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    return p


def run_checks(args: argparse.Namespace, env: dict[str, str] | os._Environ[str]) -> list[Finding]:
    findings: list[Finding] = []
    for spec in args.disk:
        path, limit = checks.parse_disk_spec(spec)
        findings += checks.check_disk(path, limit)
    if args.min_free_mem is not None:
        findings += checks.check_memory(checks.parse_size(args.min_free_mem))
    if args.max_load is not None:
        findings += checks.check_load(args.max_load)

    fake = args.fake_gpus
    if fake is None and env.get(FAKE_GPUS_ENV, "").strip():
        try:
            fake = int(env[FAKE_GPUS_ENV])
        except ValueError:
            raise UsageError(f"{FAKE_GPUS_ENV}={env[FAKE_GPUS_ENV]!r} is not a number") from None
    gpu_flags = args.gpus is not None or args.gpu_max_temp is not None or bool(args.xid)
    if fake is None and not gpu_flags:
        return findings
    want_xids = args.xid is not False
    view: GpuView
    if fake is not None:
        view = fake_view(fake, env.get(FAKE_FAULTS_ENV))
    else:
        view = nvml_view(want_temperatures=args.gpu_max_temp is not None, watch_xids=want_xids)
    findings += checks.check_gpus(view, expected=args.gpus, max_temp=args.gpu_max_temp)
    if want_xids:
        now = time.time()
        log = None
        if args.kernel_log is not None or fake is None:  # fake GPUs have no kernel log
            log = read_kernel_log(now - args.xid_window, path=args.kernel_log)
            if log is None and args.kernel_log is not None:
                findings.append(Finding(DRAIN, f"cannot read kernel log {args.kernel_log}"))
        findings += checks.check_xids(
            view, log, window=args.xid_window, now=now, boot_time=_boot_time(),
            state_path=args.xid_state,
        )
    return findings


def report(findings: list[Finding], out: TextIO) -> int:
    """Reason first: the most severe finding; then the others; warnings last."""
    fails = [f.message for f in findings if f.severity == FAIL]
    drains = [f.message for f in findings if f.severity == DRAIN]
    warnings = [f.message for f in findings if f.severity == WARNING]
    for line in fails + drains:
        print(line, file=out)
    for line in warnings:
        print(f"WARNING: {line}", file=out)
    if fails:
        return EXIT_FAIL
    return EXIT_DRAIN if drains else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.version:
            from ranch.protocol.release import version_text

            print(version_text())
            return EXIT_OK
        findings = run_checks(args, os.environ)
    except (UsageError, ValueError) as exc:
        print(f"ranch-healthcheck: {exc}", file=sys.stdout)
        return EXIT_DRAIN
    code = report(findings, sys.stdout)
    sys.stdout.flush()
    return code


def _boot_time() -> float | None:
    try:
        import psutil

        return float(psutil.boot_time())
    except Exception:
        return None


if __name__ == "__main__":
    sys.exit(main())
