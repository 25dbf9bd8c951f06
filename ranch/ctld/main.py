"""`rctld`: the Ranch controller daemon (foreground; logs on stderr or in its log file)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ranch.ctld.state.store import Store

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

    import trio

    from ranch.conf.build import load_config
    from ranch.conf.errors import ConfigError
    from ranch.ctld import gctune, logs
    from ranch.ctld.daemon import CannotListen, Daemon
    from ranch.ctld.rpc.admission import raise_fd_limit
    from ranch.protocol.auth import KeyFileError, create_key, load_key, resolve_key_path
    from ranch.protocol.client import parse_address
    from ranch.protocol.sdnotify import Notifier

    level = logging.DEBUG if args.verbose else logging.INFO
    logs.setup(args.log_format, level)  # stderr until the config names the log file
    try:
        config = load_config(args.file)
    except ConfigError as exc:
        for diag in exc.errors:
            print(diag.format(), file=sys.stderr)
        print(f"rctld: {args.file}: {len(exc.errors)} error(s); not starting", file=sys.stderr)
        if chosen:
            print(f"rctld: no -f given: {args.file} is {chosen}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"rctld: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    log_file = args.log_file if args.log_file is not None else config.control.log_file
    try:
        sink = logs.setup(args.log_format, level, None if log_file in (None, "-") else log_file)
    except OSError as exc:
        print(f"rctld: cannot open log file {log_file}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for warning in config.warnings:
        logs.event("config warning", logging.WARNING, detail=warning.format().splitlines()[0])

    key_path = resolve_key_path(args.key_file, config.auth.key_file)
    try:
        if not os.path.exists(key_path):
            create_key(key_path)
            logs.event("created cluster key; give nodes and commands this file", path=key_path)
        key = load_key(key_path)
    except KeyFileError as exc:
        print(f"rctld: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"rctld: cannot create key file {key_path}: {exc.strerror or exc}", file=sys.stderr)
        return 1

    if args.listen:
        try:
            host, port = parse_address(args.listen, config.control.port)
        except ValueError as exc:
            print(f"rctld: --listen: {exc}", file=sys.stderr)
            return 2
    else:
        hosts = config.control.hosts
        host = (hosts[0].addr or hosts[0].name) if hosts else "0.0.0.0"
        port = config.control.port
    etcd = config.control.state_store == "etcd"
    name = ""
    if etcd:
        found = _which_controller(config, args.name, host if args.listen else None)
        if isinstance(found, str):
            print(f"rctld: {found}", file=sys.stderr)
            return 2
        name = found.name
        if not args.listen:
            host = found.addr or found.name

    if args.state_dir:
        state_dir, origin = args.state_dir, "--state-dir"
    elif config.control.state_save_location:
        state_dir, origin = config.control.state_save_location, "StateSaveLocation"
    else:
        state_dir, origin = DEFAULT_STATE_DIR, "default"
    state_dir = os.path.abspath(state_dir)
    try:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
    except OSError as exc:
        print(f"rctld: cannot create state dir {state_dir}: {exc.strerror}", file=sys.stderr)
        return 1
    from ranch.ctld.state.statelock import StateDirBusy, acquire

    try:
        acquire(state_dir)  # held until this process ends (ctld/state/statelock.py)
    except StateDirBusy as exc:
        print(f"rctld: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"rctld: cannot lock state dir {state_dir}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    logs.event("state directory", path=state_dir, source=origin)
    logs.event("starting", config=config.path, hash=config.config_hash[:12], key=key_path)

    daemons: list[Daemon] = []

    def make_daemon(store: Store | None = None, grace: float = 0.0,
                    handover: Callable[[], Awaitable[None]] | None = None) -> Daemon:
        daemon = Daemon(config, key, state_dir=state_dir, host=host, port=port,
                        config_path=args.file, on_ready=gctune.freeze_startup_heap,
                        key_file=os.path.abspath(key_path), log_sink=sink,
                        notifier=Notifier(), ignore_damaged=args.ignore_damaged_state,
                        store=store, grace=grace, handover=handover)
        daemons[:] = [daemon]
        return daemon

    async def amain() -> None:
        if etcd:  # a controller pair (issue 32): campaign, serve while holding the seat
            from ranch.ctld.compose.controller import VERSION
            from ranch.ctld.pair.controller import Controller

            logs.event("state store", store="etcd", name=name,
                       endpoints=",".join(config.control.etcd_endpoints),
                       prefix=config.control.etcd_prefix)
            await Controller(config, key, name=name, host=host, port=port,
                             state_dir=state_dir, make_daemon=make_daemon,
                             version=VERSION).run(signals=True)
            return
        await make_daemon().run(signals=True)

    gctune.configure()
    # as slurmctld does: the connection caps follow from it (ctld/rpc/admission.py)
    raise_fd_limit()
    from ranch.ctld.state.integrity import DamagedState

    try:
        trio.run(amain)
    except DamagedState as exc:  # nothing was written: the files are as they were found
        print(f"rctld: {exc}", file=sys.stderr)
        return 1
    except (CannotListen, BaseExceptionGroup) as exc:
        damaged = _find(exc, DamagedState)
        if damaged is not None:
            print(f"rctld: {damaged}", file=sys.stderr)
            return 1
        refused = _find(exc, CannotListen)
        if refused is None:
            raise
        logs.event("cannot listen", logging.ERROR, on=refused.what, addr=refused.addr,
                   error=refused.error.strerror or str(refused.error))
        return 1
    except KeyboardInterrupt:  # Ctrl-C before the signal handler was installed
        if daemons:
            daemons[0].save_now()
    logs.event("stopped")
    return 0


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
