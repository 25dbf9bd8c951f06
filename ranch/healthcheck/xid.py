"""NVIDIA XID codes: which ones fail a node and why, and a parser for the driver's kernel-log
lines in every format we read (/dev/kmsg records, dmesg, journalctl, syslog files). Pure."""

from __future__ import annotations

import hashlib
import re
import time
from datetime import datetime

import attrs


@attrs.frozen
class XidInfo:
    code: int
    fatal: bool
    meaning: str


# Fatal: the GPU cannot be trusted with the next job until it is reset, repaired or replaced
# (memory integrity lost, GPU or link gone, firmware dead). Everything else, including codes we do
# not know, is a warning: most of those (13, 31, 43, 45...) are raised by a faulty application,
# and draining on them would let one buggy job take nodes out of service.
_TABLE = (
    XidInfo(48, True, "double-bit ECC error (uncorrectable memory error)"),
    XidInfo(61, True, "internal micro-controller breakpoint/warning (GPU needs a reset)"),
    XidInfo(62, True, "internal micro-controller halt (GPU needs a reset)"),
    XidInfo(64, True, "ECC page retirement or row remapping recording failure"),
    XidInfo(74, True, "NVLink error (link down or degraded)"),
    XidInfo(79, True, "GPU has fallen off the bus"),
    XidInfo(92, True, "high single-bit ECC error rate (memory failing)"),
    XidInfo(94, True, "contained ECC error (GPU reset needed to retire the memory)"),
    XidInfo(95, True, "uncontained ECC error (memory corruption may have spread)"),
    XidInfo(119, True, "GSP RPC timeout (GPU firmware not answering)"),
    XidInfo(120, True, "GSP error (GPU firmware fault)"),
    XidInfo(154, True, "GPU recovery action changed (reset or reboot required)"),
    XidInfo(13, False, "graphics engine exception (usually an application fault)"),
    XidInfo(31, False, "GPU memory page fault (usually an application fault)"),
    XidInfo(32, False, "invalid or corrupted push buffer stream"),
    XidInfo(43, False, "GPU stopped processing (application channel reset)"),
    XidInfo(45, False, "preemptive cleanup after an earlier error"),
    XidInfo(63, False, "ECC page retirement or row remapping event (reset when idle)"),
    XidInfo(68, False, "video processor exception"),
    XidInfo(69, False, "graphics engine class error"),
    XidInfo(109, False, "context switch timeout"),
)
XID_TABLE: dict[int, XidInfo] = {info.code: info for info in _TABLE}
FATAL_XIDS = frozenset(info.code for info in _TABLE if info.fatal)


@attrs.frozen
class XidEvent:
    device: str  # PCI bus id as the kernel prints it: "0000:3b:00"
    code: int
    detail: str = ""
    time: float | None = None  # wall clock when the line tells it
    key: str = ""  # identity of this one event, for the state file

    @property
    def fatal(self) -> bool:
        return self.code in FATAL_XIDS

    def describe(self) -> str:
        return f"GPU {self.device} XID {self.code}: {meaning(self.code, self.detail)}"


def meaning(code: int, detail: str = "") -> str:
    info = XID_TABLE.get(code)
    if info is not None:
        return info.meaning
    text = _strip_pid(detail)
    return text or "unknown XID"


def normalize_bus_id(text: str) -> str:
    """'00000000:3B:00.0' (NVML), 'PCI:0000:3b:00' (kernel) -> '0000:3b:00'."""
    text = text.strip().lower().removeprefix("pci:")
    match = re.fullmatch(r"([0-9a-f]{1,8}):([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.[0-9a-f])?", text)
    if match is None:
        return text
    domain, bus, device = match.groups()
    return f"{int(domain, 16) & 0xFFFF:04x}:{int(bus, 16):02x}:{int(device, 16):02x}"


_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{1,2}:[0-9A-Fa-f]{1,2})"
    r"(?:\.[0-9A-Fa-f])?\): (?P<code>\d+)(?:,\s*(?P<detail>.*))?"
)
_KMSG = re.compile(r"^\d+,(?P<seq>\d+),(?P<usec>\d+),[^;]*;")
_UPTIME = re.compile(r"\[\s*(?P<sec>\d+\.\d+)\]")
_UNIX = re.compile(r"^(?P<ts>\d{9,}\.\d+)\s")
_ISO = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\s"
)
_BSD = re.compile(r"^(?P<ts>[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2})\s")


def parse_xid_line(line: str, *, boot_time: float | None = None, now: float | None = None
                   ) -> XidEvent | None:
    """One XID event from one kernel-log line, or None. The time comes from the line's wall
    clock stamp (journalctl -o short-unix, ISO or classic syslog), else from its time since
    boot (kmsg microseconds, dmesg's [seconds]) when boot_time is given."""
    match = _XID.search(line)
    if match is None:
        return None
    now = time.time() if now is None else now
    stamp = _wall_time(line, now)
    if stamp is None and boot_time is not None:
        stamp = _boot_relative(line, boot_time)
    device = normalize_bus_id(match["bus"])
    code = int(match["code"])
    detail = (match["detail"] or "").strip()
    identity = f"{stamp:.6f}" if stamp is not None else _digest(line)
    return XidEvent(device, code, detail, stamp, f"{device}/{code}/{identity}")


def parse_xid_lines(lines: list[str] | tuple[str, ...], *, boot_time: float | None = None,
                    now: float | None = None) -> list[XidEvent]:
    events = (parse_xid_line(line, boot_time=boot_time, now=now) for line in lines)
    return [event for event in events if event is not None]


def _wall_time(line: str, now: float) -> float | None:
    if m := _UNIX.match(line):
        return float(m["ts"])
    if m := _ISO.match(line):
        text = m["ts"].replace("Z", "+00:00")
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return None
        return parsed.timestamp()  # naive stamps are local time, as syslog writes them
    if m := _BSD.match(line):
        # Classic syslog has no year: take this year's, or last year's if that is in the future.
        year = time.localtime(now).tm_year
        for candidate in (year, year - 1):
            try:
                fields = time.strptime(f"{candidate} {m['ts']}", "%Y %b %d %H:%M:%S")
            except ValueError:
                return None
            stamp = time.mktime(fields)
            if stamp <= now + 86400:
                return stamp
    return None


def _boot_relative(line: str, boot_time: float) -> float | None:
    if m := _KMSG.match(line):
        return boot_time + int(m["usec"]) / 1e6
    if m := _UPTIME.search(line):
        return boot_time + float(m["sec"])
    return None


def _strip_pid(detail: str) -> str:
    # "pid=1234, name=python, GPU has fallen off the bus." -> "GPU has fallen off the bus."
    parts = [p.strip() for p in detail.split(",")]
    while parts and re.match(r"^(pid|name)\s*[=:]", parts[0]):
        parts.pop(0)
    return ", ".join(parts).strip()


def _digest(line: str) -> str:
    return hashlib.sha256(line.strip().encode("utf-8", "replace")).hexdigest()[:16]
