"""What a command needs from cluster.conf (controllers, port, auth, SrunPortRange), read cheaply."""

# Our own reader, not conf.build: a command on a login host pays for every module it imports,
# and lark plus attrs cost ~7x Python's own start. It scans the same syntax as conf/grammar.lark
# (a character scanner: `re` is off the commands' path too), follows Include as conf.build does,
# and reads only SlurmctldHost (or ControlMachine/BackupController), SlurmctldPort, AuthKeyFile,
# AuthType, AuthInfo and SrunPortRange. What it cannot read it refuses with file:line; the rest
# of the file (nodes, partitions) is conf.build's to check. tests/conf/test_client_conf.py holds
# both readers to the same answers on generated files.

from __future__ import annotations

import os

DEFAULT_PORT = 6817
_BLANK = " \t\f\r"
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
# The first key of a line that makes it a node/partition/... line, not global settings.
_LINE_KINDS = frozenset(("nodename", "partitionname", "downnodes", "nodeset", "frontendname"))
_HOST_KEYS = ("slurmctldhost", "controlmachine", "backupcontroller")


class ClientConfError(Exception):
    """A file the reader cannot use: `where` is file:line (file alone when it cannot be read)."""

    def __init__(self, path: str, line: int, message: str) -> None:
        self.where = f"{path}:{line}" if line else path
        self.message = message
        super().__init__(f"{self.where}: {message}")


class ClientConf:
    """The controllers in the order to try them, their port, how a command signs, and the
    ports rrun may listen on for its tasks."""

    __slots__ = ("auth_type", "hosts", "key_file", "message_timeout", "munge_socket", "path",
                 "port", "srun_ports", "standby_reads")

    def __init__(self, path: str, hosts: tuple[tuple[str, str], ...], port: int,
                 key_file: str | None, auth_type: str, munge_socket: str | None,
                 srun_ports: tuple[int, int] | None = None,
                 message_timeout: float | None = None, standby_reads: bool = False) -> None:
        self.path = path
        self.hosts = hosts  # (name, address): SlurmctldHost=NAME(ADDRESS), in file order
        self.port = port
        self.key_file = key_file  # AuthKeyFile, absolute (relative to the main file's folder)
        self.auth_type = auth_type  # "" or "auth/munge"
        self.munge_socket = munge_socket  # AuthInfo=socket=PATH, absolute
        self.srun_ports = srun_ports  # SrunPortRange=LO-HI; None: any port the kernel gives
        # MessageTimeout (seconds) when the file sets a good one; the daemons' parser refuses a
        # bad one, so a command need not say it again
        self.message_timeout = message_timeout
        # SlurmctldParameters=standby_read_ms=N (N > 0): listings go to the standbys first
        self.standby_reads = standby_reads


def port_range(text: str) -> tuple[int, int]:
    """SrunPortRange's LO-HI (both 1..65535, LO <= HI); ValueError saying what is wrong.
    ranch.conf.build uses it too, so both readers take the same values."""
    lo, sep, hi = text.strip().partition("-")
    lo, hi = lo.strip(), hi.strip()
    if not (sep and lo.isdigit() and hi.isdigit() and lo.isascii() and hi.isascii()):
        raise ValueError(f"expected LOW-HIGH port numbers, got {text.strip()!r}")
    low, high = int(lo), int(hi)
    if not (1 <= low <= high <= 65535):
        raise ValueError(f"{low}-{high}: expected 1 <= LOW <= HIGH <= 65535")
    return low, high


def read(path: str) -> ClientConf:
    """The settings of `path` and its Includes; ClientConfError for what cannot be read."""
    abspath = os.path.abspath(path)
    text = _read_text(path, abspath, path, 0)
    reader = _Reader(os.path.dirname(abspath))
    reader.read(path, abspath, text, (abspath,))
    return reader.result(path)


def _read_text(display: str, abspath: str, where: str, line: int) -> str:
    try:
        with open(abspath, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        why = exc.strerror or str(exc)
    except UnicodeDecodeError:
        why = "not UTF-8 text"
    if line:
        raise ClientConfError(where, line, f"cannot read included file {display!r}: {why}")
    raise ClientConfError(display, 0, why)


class _Pair:
    __slots__ = ("key", "line", "value")

    def __init__(self, key: str, value: str, line: int) -> None:
        self.key, self.value, self.line = key, value, line


class _Reader:
    def __init__(self, base_dir: str) -> None:
        self.base_dir = base_dir
        self.cluster: str | None = None  # ClusterName so far, for Include's %c
        self.hosts: list[tuple[_Pair, str]] = []  # SlurmctldHost & co, with their file
        self.settings: dict[str, tuple[_Pair, str]] = {}  # the last of each other key

    def read(self, display: str, abspath: str, text: str, chain: tuple[str, ...]) -> None:
        for item in _scan(text, display):
            if isinstance(item, tuple):
                self.include(display, abspath, *item, chain)
                continue
            for p in item:
                if p.key.lower() == "clustername":
                    self.cluster = p.value.strip().lower()
            if item[0].key.lower() in _LINE_KINDS:
                continue
            for p in item:
                key = p.key.lower()
                if key in _HOST_KEYS:
                    self.hosts.append((p, display))
                self.settings[key] = (p, display)

    def include(self, display: str, abspath: str, name: str, line: int,
                chain: tuple[str, ...]) -> None:
        if "%c" in name:
            if self.cluster is None:
                raise ClientConfError(display, line,
                                      "Include uses %c but ClusterName is not set yet")
            name = name.replace("%c", self.cluster)
        if any(c in name for c in "*?["):
            return  # conf.build skips such a line with a warning
        target = os.path.normpath(os.path.join(os.path.dirname(abspath), name))
        shown = name if os.path.isabs(name) else os.path.normpath(
            os.path.join(os.path.dirname(display), name))
        if target in chain:
            loop = " -> ".join([*(os.path.basename(c) for c in chain), os.path.basename(target)])
            raise ClientConfError(display, line, f"Include cycle: {loop}")
        text = _read_text(name, target, display, line)
        self.read(shown, target, text, (*chain, target))

    def result(self, path: str) -> ClientConf:
        hosts = self.controllers()  # checked in conf.build's order, so both name the same error
        port = DEFAULT_PORT
        got = self.settings.get("slurmctldport")
        if got is not None:
            p, where = got
            port = _whole(p.value.split("-", 1)[0], p, where, "SlurmctldPort", 1, 65535)
        srun_ports = None
        got = self.settings.get("srunportrange")
        if got is not None:
            try:
                srun_ports = port_range(got[0].value)
            except ValueError as exc:
                raise ClientConfError(got[1], got[0].line, f"SrunPortRange: {exc}") from None
        auth_type = ""
        got = self.settings.get("authtype")
        if got is not None:
            p, where = got
            if p.value.strip().upper() != "AUTH/MUNGE":
                raise ClientConfError(where, p.line, f"AuthType: unknown value {p.value!r}; "
                                      "valid values: AUTH/MUNGE")
            auth_type = "auth/munge"
        key_file = None
        got = self.settings.get("authkeyfile")
        if got is not None:
            key_file = self._path(got[0].value.strip()) or None
        message_timeout = None
        got = self.settings.get("messagetimeout")
        if got is not None and got[0].value.strip().isdecimal() and int(got[0].value) >= 1:
            message_timeout = float(int(got[0].value))
        got = self.settings.get("slurmctldparameters")
        standby_reads = got is not None and any(
            k.strip().lower() == "standby_read_ms" and v.strip().isdigit() and int(v) > 0
            for k, _, v in (o.partition("=") for o in got[0].value.split(",")))
        return ClientConf(path, hosts, port, key_file, auth_type, self.munge_socket(),
                          srun_ports, message_timeout, standby_reads)

    def controllers(self) -> tuple[tuple[str, str], ...]:
        new_style = [(p, w) for p, w in self.hosts if p.key.lower() == "slurmctldhost"]
        if new_style:
            return tuple(_host(p, where) for p, where in new_style)
        out = []
        for host_key, addr_key in (("controlmachine", "controladdr"),
                                   ("backupcontroller", "backupaddr")):
            got = self.settings.get(host_key)
            if got is not None:
                host = got[0].value.strip()
                addr = self.settings.get(addr_key)
                out.append((host, addr[0].value.strip() if addr else host))
        return tuple(out)

    def munge_socket(self) -> str | None:
        got = self.settings.get("authinfo")
        socket = None
        if got is not None:
            for part in got[0].value.split(","):
                key, _, value = part.strip().partition("=")
                if key.strip().lower() == "socket":
                    socket = self._path(value.strip())
        return socket or None

    def _path(self, value: str) -> str:
        if value and not os.path.isabs(value):
            return os.path.normpath(os.path.join(self.base_dir, value))
        return value


def _whole(text: str, p: _Pair, where: str, key: str, lo: int, hi: int) -> int:
    s = text.strip()
    digits = s[1:] if s[:1] in ("+", "-") else s
    if not digits.isdecimal():
        raise ClientConfError(where, p.line, f"{key}: {text!r} is not a whole number")
    v = int(s)
    if v < lo or v > hi:
        raise ClientConfError(where, p.line, f"{key}: {v} is out of range ({lo}..{hi})")
    return v


def _host(p: _Pair, where: str) -> tuple[str, str]:
    """SlurmctldHost=NAME or NAME(ADDRESS), neither part empty nor holding blanks or parens."""
    v = p.value.strip()
    name, paren, rest = v.partition("(")
    addr = rest[:-1] if paren and rest.endswith(")") else None
    parts = [name] if not paren else [name, addr or ""]
    if (paren and addr is None) or any(
            not x or any(c in "()" or c.isspace() for c in x) for x in parts):
        raise ClientConfError(where, p.line, f"{p.key}: expected HOST or HOST(ADDRESS), got "
                              f"{p.value!r}")
    return name, addr or name


def _scan(text: str, display: str) -> list[list[_Pair] | tuple[str, int]]:
    """The lines of `text` as conf/grammar.lark reads them: a list of _Pair per Key=Value line,
    (path, line) per Include line; the first syntax error raised as ClientConfError."""
    if not text.endswith("\n"):
        text += "\n"
    s = _Scanner(text, display)
    out: list = []
    while True:
        s.skip()
        if s.i >= s.n:
            return out
        if text[s.i] == "\n":
            s.newline()
            continue
        if text[s.i:s.i + 7].lower() == "include" and text[s.i + 7:s.i + 8] in (" ", "\t"):
            s.i += 7
            s.skip()
            line = s.line
            if text[s.i:s.i + 1] == '"':
                name = s.quoted()
            else:
                name = s.bare("Include needs a file name", path=True)
            out.append((name, line))
        else:
            pairs = []
            while True:
                pairs.append(s.pair())
                s.skip()
                if s.i >= s.n or text[s.i] == "\n":
                    break
            out.append(pairs)
        s.end_of_line()


class _Scanner:
    __slots__ = ("display", "i", "line", "n", "text")

    def __init__(self, text: str, display: str) -> None:
        self.text, self.display, self.i, self.n, self.line = text, display, 0, len(text), 1

    def fail(self, message: str) -> ClientConfError:
        return ClientConfError(self.display, self.line, message)

    def newline(self) -> None:
        self.i += 1
        self.line += 1

    def skip(self) -> None:
        """Past blanks, a comment, and backslash-newline continuations (the grammar's %ignore)."""
        t, n = self.text, self.n
        while self.i < n:
            c = t[self.i]
            if c in _BLANK:
                self.i += 1
            elif c == "#":
                end = t.find("\n", self.i)
                self.i = n if end < 0 else end
            elif c == "\\" and t[self.i + 1:self.i + 2] == "\n":
                self.i += 2
                self.line += 1
            elif c == "\\" and t[self.i + 1:self.i + 3] == "\r\n":
                self.i += 3
                self.line += 1
            else:
                return

    def end_of_line(self) -> None:
        self.skip()
        if self.i >= self.n:  # the text ends in a newline: a continuation took it
            raise self.fail("unexpected end of file")
        if self.text[self.i] != "\n":
            raise self.fail(f"unexpected {self.text[self.i]!r}; expected the end of the line")
        self.newline()

    def pair(self) -> _Pair:
        t, start = self.text, self.i
        while self.i < self.n and t[self.i] in _KEY_CHARS:
            self.i += 1
        if self.i == start:
            raise self.fail(f"unexpected character {t[self.i]!r}; expected Key=Value")
        key = t[start:self.i]
        self.skip()
        if t[self.i:self.i + 1] in ("+", "-", "*", "/"):
            self.i += 1
        if t[self.i:self.i + 1] != "=":
            raise self.fail("expected '=' after the key")
        self.i += 1
        self.skip()
        line = self.line
        if t[self.i:self.i + 1] == '"':
            return _Pair(key, self.quoted(), line)
        return _Pair(key, self.bare("missing value after '='"), line)

    def quoted(self) -> str:
        t = self.text
        end = self.i + 1
        while end < self.n and t[end] not in '"\n':
            end += 1
        if end >= self.n or t[end] != '"':
            raise self.fail('unterminated quoted value (missing closing ")')
        value = t[self.i + 1:end]
        self.i = end + 1
        return value

    def bare(self, missing: str, path: bool = False) -> str:
        """A value (or Include's path) up to a blank, `#` or the line's end; `\\#` is a #,
        `\\\\` a backslash, any other backslash pair kept as written. A `"` may not start a
        value, nor be anywhere in a path."""
        t, n = self.text, self.n
        out: list[str] = []
        first = True
        while self.i < n:
            c = t[self.i]
            if c == "\\":
                nxt = t[self.i + 1:self.i + 2]
                if nxt in ("", "\n"):
                    break
                out.append(nxt if nxt in "#\\" else c + nxt)
                self.i += 2
            elif c == "#" or c.isspace() or (c == '"' and (first or path)):
                break
            else:
                out.append(c)
                self.i += 1
            first = False
        if not out:
            raise self.fail(missing)
        return "".join(out)
