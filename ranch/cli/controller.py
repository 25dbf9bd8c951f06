"""Finding and asking the controller: address and key precedence, one request, one-line errors.

Requests go through ranch.protocol.client.request_raw: bodies are plain dicts, so a command imports
neither attrs nor cattrs nor the message classes (they cost more than the whole render).
"""

from __future__ import annotations

import gc
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6817
SERVER_ENV = "RANCH_SERVER"
CONF_ENV = "RANCH_CONF"
# the file a site installs; here, not in conf.client, so the RANCH_SERVER path imports no conf
INSTALLED_CONF = "/etc/ranch/cluster.conf"
REQUEST_TIMEOUT = 10.0
# With another controller to try next, one that does not take the connection within this long
# (its host is down or cut off) is passed over: a standby is a connect away
CONNECT_TIMEOUT = 2.0
RETRY_PAUSE = 0.2  # between two passes over the controllers while none serves
# With another controller listed, a request sent to one that then stays silent this long
# (MessageTimeout; Slurm's default) is given up, as Slurm's commands give it up: the one waited
# on may be a leader cut off the network, and waiting out a longer timeout of the command's own
# (rcancel's 30 s) on it keeps the user, and any loop of commands, that long from the new one.
MESSAGE_TIMEOUT = 10.0


# sbatch, srun and salloc exit 255 (their exit(-1)) when they refuse their command line: an
# unknown option, a missing argument, a value their parser refuses (measured on Slurm 22.05;
# tests/conformance/test_value_matrix.py). Every other command exits 1 for those.
LAUNCHER_USAGE = 255
LAUNCHERS = frozenset({"sbatch", "srun", "salloc", "rbatch", "rrun", "ralloc"})


class CliError(Exception):
    """A failure to report on stderr as one line; `code` is the exit status: 1 for a failure
    and for a usage error alike, as Slurm's commands."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def reason_lines(prog: str, message: str) -> str:
    """A refusal slurmctld sent with its reason (ESLURM_ACCOUNTING_POLICY with, say,
    AssocMaxSubmitJobLimit): the reason on an error line of its own first, as sbatch and salloc
    print it; the last line is returned for the command's own words. `prog`: the name it speaks
    as (cli/slurm_names.py prog)."""
    *first, last = message.split("\n")
    for line in first:
        print(f"{prog}: error: {line}", file=sys.stderr)
    return last


def run_main(prog: str, run: Callable[[list[str]], int], argv: list[str] | None) -> int:
    """A command's main(): `run` on the arguments; a CliError is one stderr line and its exit
    code, Ctrl-C exits 130, a reader that went away (`| head`) is not our failure. Under a
    Slurm name (cli/slurm_names.py) messages start with that name."""
    from ranch.cli.slurm_names import prog as speaking_as

    prog = speaking_as(prog)
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except CliError as exc:
        print(f"{prog}: error: {exc.message}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


class no_gc:  # lower case: used as `with no_gc():`, as the function it replaced was
    """The cyclic GC off for one run: the snapshot's ~10^5 dicts and lists hold no cycles, and
    collections triggered while rendering would rescan them all (about half the -N time).
    A class, not contextlib.contextmanager: contextlib costs every command's start."""

    def __enter__(self) -> None:
        self.was_on = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_on:
            gc.enable()


def exit_now(code: int | None) -> None:
    """End a command that has done its work, as a C command ends: stdout and stderr flushed,
    then os._exit, skipping the interpreter's teardown (freeing each module and object one by
    one: ~3 ms, a third of Python's own start, for a process about to vanish). For launchers
    (bin/*): nothing else may be pending, no atexit handler, no unwritten file."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass  # the reader left (`| head`): as run_main, not our failure
    except OSError:
        code = code or 1
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code or 0)


class Target:
    """Where the controller is and which key signs for it (plain class: no attrs at start-up)."""

    __slots__ = ("controllers", "host", "key_path", "message_timeout", "munge", "origin",
                 "port", "srun_ports", "standby_reads")

    def __init__(self, host: str, port: int, key_path: str, origin: str,
                 munge: str | None = None,
                 controllers: tuple[tuple[str, str, int], ...] = (),
                 srun_ports: tuple[int, int] | None = None,
                 message_timeout: float | None = None, standby_reads: bool = False) -> None:
        self.host = host
        self.port = port
        # every controller to try, in order, as (name, host, port): SlurmctldHost's entries or
        # --server's list (issue 32); host/port above is the one that answered last
        self.controllers = controllers or ((host, host, port),)
        self.key_path = key_path
        self.origin = origin  # where the address came from, for error messages
        # AuthType=auth/munge in the config: munged's socket ("" = MUNGE's default); None: the
        # cluster key, or munge when the key cannot be read (cli/credential.py)
        self.munge = munge
        self.srun_ports = srun_ports  # the config's SrunPortRange, for rrun's listener
        self.message_timeout = message_timeout  # the config's MessageTimeout, if it sets one
        # SlurmctldParameters=standby_read_ms: listings ask the standbys first (issue 47)
        self.standby_reads = standby_reads

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Target({self.host!r}, {self.port}, {self.key_path!r}, {self.origin!r})"

    def _key(self) -> tuple[str, int, str, str]:
        return (self.host, self.port, self.key_path, self.origin)

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def find_target(
    server: str | None,
    key_file: str | None,
    conf_path: str | None,
    env: Mapping[str, str] | None = None,
) -> Target:
    """--server > RANCH_SERVER > SlurmctldHost/Port of the config > 127.0.0.1:6817; the key
    from --key-file > RANCH_KEY_FILE > AuthKeyFile > ranch.protocol.auth's default path. The config
    is -f/--conf, else RANCH_CONF, else /etc/ranch/cluster.conf when there is one. SLURM_CONF is
    not read: where Slurm runs beside Ranch it names slurmctld's file, whose controller does
    not speak Ranch; a site that shares one file says RANCH_CONF=$SLURM_CONF."""
    env = os.environ if env is None else env
    conf_path = conf_path or env.get(CONF_ENV) or None
    if conf_path is None and os.path.exists(INSTALLED_CONF):
        conf_path = INSTALLED_CONF
    server_text, origin = (server, "--server") if server else (env.get(SERVER_ENV), SERVER_ENV)
    cfg = None
    if conf_path:  # its AuthType decides how to sign, whatever else is given
        cfg = _load_config(conf_path)
    controllers: tuple[tuple[str, str, int], ...] = ()
    if server_text:
        listed = [_parse_address(x, origin) for x in server_text.split(",") if x.strip()]
        if not listed:
            raise CliError(f"{origin}: no address given")
        controllers = tuple((h, h, p) for h, p in listed)
        host, port = listed[0]
    elif cfg is not None and cfg.hosts:
        # SlurmctldHost's entries in order, (name, address, port): the first that answers as
        # the controller serves (issue 32)
        controllers = tuple((name, addr, cfg.port) for name, addr in cfg.hosts)
        host, port, origin = controllers[0][1], cfg.port, f"config {conf_path}"
    elif cfg is not None:
        host, port, origin = DEFAULT_HOST, cfg.port, f"config {conf_path}"
    else:
        host, port, origin = DEFAULT_HOST, DEFAULT_PORT, "the default"
    from ranch.protocol.auth import resolve_key_path

    key_path = resolve_key_path(key_file, cfg.key_file if cfg else None, env=env)
    munge = None
    if cfg is not None and cfg.auth_type == "auth/munge":
        munge = cfg.munge_socket or env.get("RANCH_MUNGE_SOCKET", "")
    return Target(host, port, key_path, origin, munge, controllers,
                  cfg.srun_ports if cfg is not None else None,
                  cfg.message_timeout if cfg is not None else None,
                  cfg is not None and cfg.standby_reads and not server_text)


def _parse_address(text: str, origin: str) -> tuple[str, int]:
    from ranch.protocol.client import parse_address

    try:
        return parse_address(text, DEFAULT_PORT)
    except ValueError as exc:
        raise CliError(f"{origin}: {exc}") from None


def _load_config(path: str):  # -> conf.client.ClientConf
    """The config's controllers and auth settings, by ranch.conf.client: the full parser (lark,
    attrs) would cost a command seven times Python's own start."""
    from ranch.conf.client import ClientConfError, read

    try:
        return read(path)
    except ClientConfError as exc:
        raise CliError(f"cannot read config {exc.where}: {exc.message}") from None


class Refused(CliError):
    """The controller answered with an Error: `message` as it wrote it, `field` the request
    field it names (empty when none), so each command can say it its way."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def request(target: Target, type_name: str, body: dict | None = None, *, want: str,
            timeout: float = REQUEST_TIMEOUT, shown: bool = False) -> dict:
    """Send one `type_name` request (body in the codec's shape) and return the body of the
    `want` reply: Refused for an Error reply, CliError for everything else that went wrong.
    `shown`: a listing only shown to the user (rqueue, rinfo, show job|node), which a standby
    may answer with SlurmctldParameters=standby_read_ms; never one a command acts on."""
    from ranch.cli.credential import munge_error, munge_errors, signer
    from ranch.protocol.client import ControllerUnreachable
    from ranch.protocol.rawframe import FrameError

    try:
        key, munge = signer(target)
    except CliError:
        # Without a controller the key is moot: say what is more fundamentally wrong.
        _check_reachable(target)
        raise
    # as Slurm's commands: each SlurmctldHost in order; one that is down or answers that it
    # stands by sends us on to the next at once, and while the seat changes hands (a few
    # seconds) the list is gone through again until `timeout` (issue 32). A request that may
    # have reached a controller is never sent to another.
    order = _order(target, shown)
    deadline = time.monotonic() + timeout
    silent_limit = target.message_timeout or MESSAGE_TIMEOUT
    got = ""
    reply: dict[str, object] = {}
    while not got:
        for i, (host, port) in enumerate(order):
            alone = len(order) == 1
            left = deadline - time.monotonic()
            target.host, target.port = host, port
            try:
                got, reply = _backing_off(deadline, _one_request(
                    (host, port), key, munge, type_name, body or {},
                    timeout if alone else min(max(left, 0.5), silent_limit),
                    None if alone else max(0.2, min(CONNECT_TIMEOUT, left))))
            except ControllerUnreachable as exc:
                if alone or exc.sent or (i == len(order) - 1
                                         and time.monotonic() + RETRY_PAUSE >= deadline):
                    raise _unreachable(target, exc.reason) from None
                continue
            except FrameError as exc:
                raise CliError(f"controller at {target.address}: {exc.code}: {exc.message}"
                               ) from None
            except munge_errors(munge) as exc:
                raise munge_error(exc) from None
            if got == "Error" and reply.get("code") == "standby" and not alone:
                if time.monotonic() + RETRY_PAUSE < deadline:
                    got = ""
                    continue
            break
        if not got:
            time.sleep(RETRY_PAUSE)
    if got == "Error":
        raise Refused(str(reply.get("message") or reply.get("code") or "no reason given"),
                      str(reply.get("field") or ""))
    if got != want:
        raise CliError(f"unexpected reply {got} from {target.address} (wanted {want})")
    return reply


def _order(target: Target, shown: bool) -> list[tuple[str, int]]:
    """The controllers to try: the one that answered last, then the others in SlurmctldHost
    order; a listing only `shown`, with standby_read_ms, the backups first and the primary
    (the leader, most of the time) last: a standby answers from its copy, stating its age, or
    sends us on (ctld/pair/standbyreads.py)."""
    if shown and target.standby_reads and len(target.controllers) > 1:
        listed = [(h, p) for _, h, p in target.controllers]
        return listed[1:] + listed[:1]
    order = [(target.host, target.port)]
    return order + [(h, p) for _, h, p in target.controllers if (h, p) not in order]


def _one_request(at: tuple[str, int], key: bytes, munge: str | None, type_name: str, body: dict,
                 wait: float, connect: float | None) -> Callable[[], tuple[str, dict]]:
    """One try at one controller (not functools.partial: functools is off the hot path)."""
    from ranch.protocol.client import request_raw

    return lambda: request_raw(at, key, type_name, body, timeout=wait, munge=munge,
                               connect_timeout=connect)


def _backing_off(deadline: float, call: Callable[[], tuple[str, dict]]) -> tuple[str, dict]:
    """`call`, again after 1 s, 2 s, 3 s... while the controller answers that this user is over
    their rate (SlurmctldParameters=rl_enable; ctld/rpc/ratelimit.py), as Slurm's commands do
    on SLURMCTLD_COMMUNICATIONS_BACKOFF, until `deadline` would pass."""
    limited = 0
    while True:
        got, reply = call()
        if got != "Error" or reply.get("code") != "backoff":
            return got, reply
        limited += 1
        if time.monotonic() + limited >= deadline:
            return got, reply
        time.sleep(limited)


def ask(
    target: Target,
    type_name: str,
    body: dict | None = None,
    *,
    want: str,
    timeout: float = REQUEST_TIMEOUT,
    shown: bool = False,
) -> dict:
    """`request`, with a refusal said as "controller at ADDR refused the request: ..."."""
    try:
        return request(target, type_name, body, want=want, timeout=timeout, shown=shown)
    except Refused as exc:
        raise CliError(f"controller at {target.address} refused the request: "
                       f"{exc.message}") from None


class Snapshot:
    """A Snapshot reply's body: node and partition records as the dicts the controller sent."""

    __slots__ = ("cluster_name", "generated_at", "nodes", "partitions")

    def __init__(self, body: dict) -> None:
        try:
            self.cluster_name: str = body["cluster_name"]
            self.generated_at: float = body.get("generated_at") or 0.0
            self.nodes: list[dict] = body["nodes"]
            self.partitions: list[dict] = body["partitions"]
        except (KeyError, TypeError) as exc:
            raise CliError(f"malformed Snapshot reply: missing {exc}") from None


def fetch_snapshot(target: Target, fields: Iterable[str] = (), *, metrics: bool = False
                   ) -> Snapshot:
    """The controller's snapshot. `fields` names the node-record keys the caller reads (empty:
    all); a controller that ignores the request sends every key, which readers must tolerate."""
    body: dict = {"metrics": metrics}
    wanted = sorted(set(fields))
    if wanted:
        body["fields"] = wanted
    return Snapshot(ask(target, "GetSnapshot", body, want="Snapshot", shown=True))


class Unreachable(CliError):
    """The controller could not be reached (or the connection broke before its reply)."""


def _unreachable(target: Target, reason: str) -> CliError:
    return Unreachable(
        f"cannot reach the controller at {target.address} (from {target.origin}): "
        f"{reason}; set its address with --server HOST:PORT or {SERVER_ENV}"
    )


def _check_reachable(target: Target) -> None:
    import socket

    try:
        socket.create_connection((target.host, target.port), timeout=2.0).close()
    except OSError as exc:
        raise _unreachable(target, exc.strerror or str(exc) or type(exc).__name__) from None
