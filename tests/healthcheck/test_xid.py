"""The XID table and the kernel-log parser on real-format lines from every source."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest

from ranch.healthcheck.kernlog import KernelLog, read_kernel_log, read_kmsg, recent_xids
from ranch.healthcheck.xid import FATAL_XIDS, XID_TABLE, normalize_bus_id, parse_xid_line

BOOT = 1_700_000_000.0
NOW = 1_700_050_000.0


def test_table_documents_each_code() -> None:
    assert {48, 61, 62, 64, 74, 79, 92, 94, 95, 119, 120} <= FATAL_XIDS
    assert not {13, 31, 43, 45, 63} & FATAL_XIDS
    assert all(info.meaning and info.code == code for code, info in XID_TABLE.items())


def test_kmsg_record() -> None:
    line = (
        "4,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, name=nvidia-smi,"
        " GPU has fallen off the bus."
    )
    event = parse_xid_line(line, boot_time=BOOT, now=NOW)
    assert event is not None
    assert (event.device, event.code) == ("0000:3b:00", 79)
    assert event.time == pytest.approx(BOOT + 5.678901)
    assert event.fatal
    assert event.describe() == "GPU 0000:3b:00 XID 79: GPU has fallen off the bus"


def test_dmesg_uptime_stamp() -> None:
    line = (
        "[ 1234.567890] NVRM: Xid (PCI:0000:b3:00): 48, pid=4242, name=python,"
        " An uncorrectable double bit error (DBE) has been detected"
    )
    event = parse_xid_line(line, boot_time=BOOT, now=NOW)
    assert event is not None and event.code == 48 and event.device == "0000:b3:00"
    assert event.time == pytest.approx(BOOT + 1234.56789)


def test_journalctl_short_unix() -> None:
    line = (
        "1700049000.123456 gpu07 kernel: NVRM: Xid (PCI:0000:41:00): 119, pid=1, name=x,"
        " Timeout after 6s of waiting for RPC response from GPU0 GSP!"
    )
    event = parse_xid_line(line, boot_time=BOOT, now=NOW)
    assert event is not None and event.code == 119
    assert event.time == pytest.approx(1700049000.123456)


def test_journalctl_iso_stamp() -> None:
    line = (
        "2023-11-15T12:30:00.500000+0000 gpu07 kernel: NVRM: Xid (PCI:0000:18:00): 31,"
        " pid=77, name=train.py, Ch 00000008, intr 00000000. MMU Fault"
    )
    event = parse_xid_line(line, now=NOW)
    assert event is not None and event.code == 31 and not event.fatal
    expected = datetime.fromisoformat("2023-11-15T12:30:00.5+00:00").timestamp()
    assert event.time == pytest.approx(expected)


def test_kern_log_syslog_format_prefers_wall_clock() -> None:
    now = time.mktime(time.strptime("2024 Mar 05 12:00:00", "%Y %b %d %H:%M:%S"))
    line = (
        "Mar  5 11:59:00 gpu07 kernel: [ 8012.123456] NVRM: Xid (PCI:0000:5d:00): 94,"
        " pid=9, name=a, Contained: SM (0x1)."
    )
    event = parse_xid_line(line, boot_time=BOOT, now=now)
    assert event is not None and event.code == 94
    assert event.time == pytest.approx(now - 60)


def test_syslog_without_year_from_last_year() -> None:
    now = time.mktime(time.strptime("2024 Jan 01 00:10:00", "%Y %b %d %H:%M:%S"))
    line = "Dec 31 23:50:00 h kernel: NVRM: Xid (PCI:0000:5d:00): 13, Graphics Exception"
    event = parse_xid_line(line, now=now)
    assert event is not None and event.time == pytest.approx(now - 1200)


def test_older_line_without_pci_prefix_and_no_stamp() -> None:
    event = parse_xid_line("NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007", now=NOW)
    assert event is not None and (event.device, event.code, event.time) == ("0000:01:00", 3, None)
    assert event.describe() == "GPU 0000:01:00 XID 3: C 00000005 SC 00000007"
    assert event.key  # undated lines still get an identity


@pytest.mark.parametrize(
    "line",
    [
        "6,1,2,-;NVRM: GPU at PCI:0000:3b:00: GPU-0b11d014",
        "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.",
        "kernel: nvidia-nvlink: Nvlink Core is being initialized",
        "",
    ],
)
def test_non_xid_lines(line: str) -> None:
    assert parse_xid_line(line, now=NOW) is None


def test_normalize_bus_id() -> None:
    assert normalize_bus_id("00000000:3B:00.0") == "0000:3b:00"
    assert normalize_bus_id("PCI:0000:3b:00") == "0000:3b:00"


def test_recent_xids_window_and_boot() -> None:
    lines = (
        f"{NOW - 7200:.6f} h kernel: NVRM: Xid (PCI:0000:3b:00): 79, old",
        f"{NOW - 60:.6f} h kernel: NVRM: Xid (PCI:0000:3b:00): 48, new",
        f"{BOOT - 100:.6f} h kernel: NVRM: Xid (PCI:0000:3b:00): 95, before boot",
        "NVRM: Xid (PCI:0000:3b:00): 13, undated",
    )
    log = KernelLog("test", lines)
    codes = [e.code for e in recent_xids(log, window=3600, now=NOW, boot_time=BOOT)]
    assert codes == [48, 13]
    codes = [e.code for e in recent_xids(log, window=1e9, now=NOW, boot_time=BOOT)]
    assert codes == [79, 48, 13]


def test_read_kmsg_and_kernel_log_from_file(tmp_path: Path) -> None:
    dump = tmp_path / "kmsg"
    dump.write_text(
        "5,0,0,-;Linux version 6.1\n"
        " SUBSYSTEM=pci\n"
        "4,99,1000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n"
    )
    lines = read_kmsg(str(dump))
    assert lines is not None and len(lines) == 3
    log = read_kernel_log(0, path=str(dump))
    assert log is not None and log.source == str(dump)
    assert read_kmsg(str(tmp_path / "missing")) is None
    assert read_kernel_log(0, path=str(tmp_path / "missing")) is None
