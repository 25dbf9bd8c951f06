"""The options (and the value words documented under each) of a Slurm 22.05 man page, read from
the installed troff source (Debian's slurm-wlm: /usr/share/man/man1/NAME.1.gz)."""

from __future__ import annotations

import gzip
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

NO, REQUIRED, OPTIONAL = "no", "required", "optional"
_ESCAPES = ((r"\-", "-"), (r"\fB", ""), (r"\fR", ""), (r"\fI", ""), (r"\fP", ""), (r"\(em", "-"),
            (r"\e", "\\"), (r"\&", ""), (r"\(aq", "'"), ('"', ""))


@dataclass
class ManOption:
    long: str  # without the dashes; "" for a short-only option
    short: str  # the letter, or ""
    arg: str  # NO, REQUIRED or OPTIONAL
    metavar: str  # the argument as the page writes it, e.g. "<time>" or "<number>[K|M|G|T]"
    words: list[str] = field(default_factory=list)  # the value words listed under it


def man_path(command: str) -> Path | None:
    try:
        out = subprocess.run(["man", "-w", command], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    path = Path(f"/usr/share/man/man1/{command}.1.gz")
    return path if path.exists() else None


def plain(line: str) -> str:
    line = re.sub(r"^\.(B|I|BR|IR|BI|RB)\s+", "", line)
    for esc, to in _ESCAPES:
        line = line.replace(esc, to)
    return line.strip()


_HEAD = re.compile(r"^(?:-(?P<short>[A-Za-z0-9?])\s*,?\s*)?(?:--(?P<long>[A-Za-z][A-Za-z0-9-]*))?"
                   r"(?P<rest>.*)$")
# Where a page leaves out an option's argument that the command requires (sacct 22.05's page
# writes `-o, --format` with no `=<list>`; sacct refuses it without one).
ARG_FIXES = {("sacct", "format"): "<field_list>", ("sacct", "partition"): "<part_list>",
             ("sacct", "qos"): "<qos_list>", ("sacct", "starttime"): "<start_time>"}


def parse_head(text: str) -> list[ManOption]:
    """The option(s) an item heading names: `-t, --time=<time>`, `--hold`, `-H, --hold`."""
    m = _HEAD.match(text)
    if not m or not (m.group("short") or m.group("long")):
        return []
    rest = m.group("rest").strip()
    rest = re.sub(r"^=?\s*,\s*--[A-Za-z-]+", "", rest)  # `--gid=, --group=<list>`: the first
    if rest.startswith("[="):
        arg, meta = OPTIONAL, rest[2:].rstrip("]")
    elif rest.startswith("="):
        arg, meta = REQUIRED, rest[1:]
    elif rest.startswith("<") or (m.group("short") and not m.group("long") and rest
                                  and not rest.startswith(",")):
        arg, meta = REQUIRED, rest
    else:
        arg, meta = NO, ""
    return [ManOption(m.group("long") or "", m.group("short") or "", arg, meta.strip())]


def read(command: str) -> list[ManOption]:
    """Every option of `command`'s page, in its order (a name listed twice is kept once)."""
    path = man_path(command)
    if path is None:
        return []
    raw = gzip.open(path, "rt", errors="replace").read() if path.suffix == ".gz" \
        else path.read_text(errors="replace")
    lines = raw.splitlines()
    out: list[ManOption] = []
    seen: set[tuple[str, str]] = set()
    current: ManOption | None = None
    for i, line in enumerate(lines[:-1]):
        if not line.startswith(".TP"):
            continue
        head = plain(lines[i + 1])
        if head.startswith("-"):
            found = parse_head(head)
            current = None
            for opt in found:
                if (opt.long, opt.short) in seen:
                    continue
                seen.add((opt.long, opt.short))
                if (command, opt.long) in ARG_FIXES:
                    opt.arg, opt.metavar = REQUIRED, ARG_FIXES[command, opt.long]
                out.append(opt)
                current = opt
        elif current is not None and head and len(head) < 40 and not head.endswith("."):
            current.words.append(head)
    return out


if __name__ == "__main__":
    import sys

    for opt in read(sys.argv[1]):
        print(f"{opt.short:2} {opt.long:28} {opt.arg:9} {opt.metavar[:40]:40} {opt.words[:8]}")
