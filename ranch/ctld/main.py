"""`rctld`: the Ranch controller daemon (foreground; logs on stderr or in its log file)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ranch.conf.model import ClusterConfig
    from ranch.ctld.daemon import Daemon
    from ranch.ctld.state.store import Store
    from ranch.protocol.logformat import LogSink

E = TypeVar("E", bound=BaseException)
# As slurmctld reads /etc/slurm/slurm.conf (SLURM_CONF overrides): never relative to the cwd,
# which is / under systemd.
DEFAULT_CONF = "/etc/ranch/cluster.conf"
CONF_ENV = "RANCH_CONF"
DEFAULT_STATE_DIR = "/var/lib/ranch"


def default_conf() -> str:
    return os.environ.get(CONF_ENV) or DEFAULT_CONF


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rctld",
        description="Ranch controller: serves the config to rnoded, tracks every node's state.",
    )
    p.add_argument("-f", "--file", metavar="FILE",
                   help=f"cluster.conf to run (default: ${CONF_ENV}, else {DEFAULT_CONF})")
    p.add_argument("--listen", metavar="HOST:PORT",
                   help="address to listen on (default: SlurmctldHost address, SlurmctldPort)")
    p.add_argument("--state-dir", metavar="DIR",
                   help=f"where state is saved (default: StateSaveLocation, else "
                        f"{DEFAULT_STATE_DIR})")
    p.add_argument("--key-file", metavar="F",
                   help="cluster key (default: RANCH_KEY_FILE, else AuthKeyFile); created if "
                        "missing")
    p.add_argument("-i", "--ignore-damaged-state", action="store_true",
                   help="start even if saved state is damaged or missing: each damaged file "
                        "is moved aside (FILE.damaged-TIME, never deleted), what checks out in "
                        "it is kept, what the other files prove is missing is logged at ERROR "
                        "and started without, job ids resume past every id seen, a snapshot is "
                        "written at once (as slurmctld -i)")
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="log lines as text (UTC time, level, message) or one JSON object each")
    p.add_argument("--log-file", metavar="FILE",
                   help="append the log to FILE, reopened on SIGUSR2 and SIGHUP (default: "
                        "SlurmctldLogFile, else stderr; - for stderr)")
    p.add_argument("--name", metavar="NAME",
                   help="with StateStore=etcd: which SlurmctldHost this controller is (default: "
                        "the entry whose address is --listen's host, else this host's name)")
    p.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.add_argument("--check", action="store_true",
                   help="validate the config and exit: 0 valid, 2 not, 1 (slurmctld's status) "
                        "when slurmctld 22.05 would not start with it (an unknown key, ...)")
    p.add_argument("--strict", action="store_true",
                   help="with --check: unknown keys and settings that slurmctld 22.05 refuses "
                        "at start are errors, not warnings")
    p.add_argument("--json", action="store_true", help="with --check: JSON diagnostics")
    return p


class Refused(Exception):
    """rctld does not start: the lines it prints on stderr, and its exit status."""

    def __init__(self, status: int, *lines: str) -> None:
        super().__init__(*lines)
        self.status, self.lines = status, lines


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.version:
        from ranch.protocol.release import version_text

        print(version_text())
        return 0
    chosen = ("" if args.file else f"the config ${CONF_ENV} names" if os.environ.get(CONF_ENV)
              else f"the default config; -f FILE or ${CONF_ENV} names another")
    args.file = args.file or default_conf()
    if args.check:
        from ranch.ctld.check import run_check

        return run_check(args.file, strict=args.strict, as_json=args.json)
    if args.strict or args.json:
        print("rctld: --strict and --json go with --check", file=sys.stderr)
        return 2
    try:
        return Start(args, chosen).run()
    except Refused as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return exc.status


class Start:
    """What rctld starts with, worked out in order from its options and the config: the log,
    the cluster key, where it listens, its state directory (locked); then it runs."""

    def __init__(self, args: argparse.Namespace, chosen: str) -> None:
        """`chosen`: why the config is the one it is, when no -f named it."""
        from ranch.ctld import logs

        self.args = args
        self.level = logging.DEBUG if args.verbose else logging.INFO
        logs.setup(args.log_format, self.level)  # stderr until the config names the log file
        self.config = _load(args.file, chosen)
        self.sink = self._open_log()
        for warning in self.config.warnings:
            logs.event("config warning", logging.WARNING, detail=warning.format().splitlines()[0])
        self.key_path, self.key = _cluster_key(args.key_file, self.config)
        self.host, self.port, self.name = _address(args, self.config)
        self.state_dir = _state_dir(args.state_dir, self.config)
        logs.event("starting", config=self.config.path, hash=self.config.config_hash[:12],
                   key=self.key_path)
        self.daemons: list[Daemon] = []  # the one serving, once made (Ctrl-C saves its state)

    def _open_log(self) -> LogSink:
        from ranch.ctld import logs

        args = self.args
        log_file = args.log_file if args.log_file is not None else self.config.control.log_file
        try:
            return logs.setup(args.log_format, self.level,
                              None if log_file in (None, "-") else log_file)
        except OSError as exc:
            raise Refused(1, f"rctld: cannot open log file {log_file}: "
                             f"{exc.strerror or exc}") from None

    def make_daemon(self, store: Store | None = None, grace: float = 0.0,
                    handover: Callable[[], Awaitable[None]] | None = None) -> Daemon:
        from ranch.ctld import gctune
        from ranch.ctld.daemon import Daemon
        from ranch.protocol.sdnotify import Notifier

        daemon = Daemon(self.config, self.key, state_dir=self.state_dir, host=self.host,
                        port=self.port, config_path=self.args.file,
                        on_ready=gctune.freeze_startup_heap,
                        key_file=os.path.abspath(self.key_path), log_sink=self.sink,
                        notifier=Notifier(), ignore_damaged=self.args.ignore_damaged_state,
                        store=store, grace=grace, handover=handover)
        self.daemons[:] = [daemon]
        return daemon

    async def serve(self) -> None:
        from ranch.ctld import logs

        config = self.config
        if config.control.state_store != "etcd":
            await self.make_daemon().run(signals=True)
            return
        # a controller pair (issue 32): campaign, serve while holding the seat
        from ranch.ctld.compose.controller import VERSION
        from ranch.ctld.pair.controller import Controller

        logs.event("state store", store="etcd", name=self.name,
                   endpoints=",".join(config.control.etcd_endpoints),
                   prefix=config.control.etcd_prefix)
        from ranch.ctld.compose.standbyview import standby_view

        await Controller(config, self.key, name=self.name, host=self.host, port=self.port,
                         state_dir=self.state_dir, make_daemon=self.make_daemon,
                         version=VERSION, make_view=standby_view(config)).run(signals=True)

    def run(self) -> int:
        import trio

        from ranch.ctld import gctune, logs
        from ranch.ctld.daemon import CannotListen
        from ranch.ctld.rpc.admission import raise_fd_limit
        from ranch.ctld.state.integrity import DamagedState

        gctune.configure()
        # as slurmctld does: the connection caps follow from it (ctld/rpc/admission.py)
        raise_fd_limit()
        try:
            trio.run(self.serve)
        except DamagedState as exc:  # nothing was written: the files are as they were found
            raise Refused(1, f"rctld: {exc}") from None
        except (CannotListen, BaseExceptionGroup) as exc:
            damaged = _find(exc, DamagedState)
            if damaged is not None:
                raise Refused(1, f"rctld: {damaged}") from None
            refused = _find(exc, CannotListen)
            if refused is None:
                raise
            logs.event("cannot listen", logging.ERROR, on=refused.what, addr=refused.addr,
                       error=refused.error.strerror or str(refused.error))
            return 1
        except KeyboardInterrupt:  # Ctrl-C before the signal handler was installed
            if self.daemons:
                self.daemons[0].saver.save_now()
        logs.event("stopped")
        return 0


def _load(path: str, chosen: str) -> ClusterConfig:
    from ranch.conf.build import load_config
    from ranch.conf.errors import ConfigError

    try:
        return load_config(path)
    except ConfigError as exc:
        lines = [diag.format() for diag in exc.errors]
        lines.append(f"rctld: {path}: {len(exc.errors)} error(s); not starting")
        if chosen:
            lines.append(f"rctld: no -f given: {path} is {chosen}")
        raise Refused(1, *lines) from None
    except OSError as exc:
        raise Refused(1, f"rctld: cannot read {path}: {exc.strerror or exc}") from None


def _cluster_key(option: str | None, config: ClusterConfig) -> tuple[str, bytes]:
    """(its path, the key): the file is created if missing."""
    from ranch.ctld import logs
    from ranch.protocol.auth import KeyFileError, create_key, load_key, resolve_key_path

    key_path = resolve_key_path(option, config.auth.key_file)
    try:
        if not os.path.exists(key_path):
            create_key(key_path)
            logs.event("created cluster key; give nodes and commands this file", path=key_path)
        return key_path, load_key(key_path)
    except KeyFileError as exc:
        raise Refused(1, f"rctld: {exc}") from None
    except OSError as exc:
        raise Refused(1, f"rctld: cannot create key file {key_path}: "
                         f"{exc.strerror or exc}") from None


def _address(args: argparse.Namespace, config: ClusterConfig) -> tuple[str, int, str]:
    """(host, port) to listen on, and which SlurmctldHost this is (StateStore=etcd, else "")."""
    from ranch.protocol.client import parse_address

    if args.listen:
        try:
            host, port = parse_address(args.listen, config.control.port)
        except ValueError as exc:
            raise Refused(2, f"rctld: --listen: {exc}") from None
    else:
        hosts = config.control.hosts
        host = (hosts[0].addr or hosts[0].name) if hosts else "0.0.0.0"
        port = config.control.port
    if config.control.state_store != "etcd":
        return host, port, ""
    found = _which_controller(config, args.name, host if args.listen else None)
    if isinstance(found, str):
        raise Refused(2, f"rctld: {found}")
    return (host if args.listen else found.addr or found.name), port, found.name


def _state_dir(option: str | None, config: ClusterConfig) -> str:
    """The state directory, made if missing and locked until this process ends
    (ctld/state/statelock.py)."""
    from ranch.ctld import logs
    from ranch.ctld.state.statelock import StateDirBusy, acquire

    if option:
        state_dir, origin = option, "--state-dir"
    elif config.control.state_save_location:
        state_dir, origin = config.control.state_save_location, "StateSaveLocation"
    else:
        state_dir, origin = DEFAULT_STATE_DIR, "default"
    state_dir = os.path.abspath(state_dir)
    try:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise Refused(1, f"rctld: cannot create state dir {state_dir}: {exc.strerror}") from None
    try:
        acquire(state_dir)
    except StateDirBusy as exc:
        raise Refused(1, f"rctld: {exc}") from None
    except OSError as exc:
        raise Refused(1, f"rctld: cannot lock state dir {state_dir}: "
                         f"{exc.strerror or exc}") from None
    logs.event("state directory", path=state_dir, source=origin)
    return state_dir


def _which_controller(config, name: str | None, listen_host: str | None):
    """The SlurmctldHost entry this rctld is, or a message saying why none fits."""
    import socket

    hosts = config.control.hosts
    if not hosts:
        return "StateStore=etcd needs SlurmctldHost lines (one per controller)"
    names = ", ".join(h.name for h in hosts)
    if name:
        for h in hosts:
            if h.name == name:
                return h
        return f"--name {name}: not a SlurmctldHost of {config.path} ({names})"
    if listen_host:
        for h in hosts:
            if listen_host in (h.addr, h.name):
                return h
    me = socket.gethostname()
    for h in hosts:
        if h.name in (me, me.split(".")[0]):
            return h
    return (f"this host ({me}) is none of the SlurmctldHost entries ({names}); "
            "say which with --name")


def _find(exc: BaseException, kind: type[E]) -> E | None:
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find(inner, kind)
            if found is not None:
                return found
    return None


if __name__ == "__main__":
    sys.exit(main())
