"""`rnoded`: the node daemon command line (configless: the controller address is all it needs)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import trio

from ranch.noded.gpus import open_gpus
from ranch.noded.hardware import probe_hardware, short_hostname, slurmd_c_text
from ranch.noded.logs import setup_logging
from ranch.noded.options import NodeOptions
from ranch.noded.session import NodeDaemon
from ranch.noded.spoollock import SpoolBusy, lock_spool
from ranch.protocol.auth import KeyFileError, load_key, resolve_key_path
from ranch.protocol.client import parse_address
from ranch.protocol.logformat import LogSink
from ranch.protocol.messages import NodeSettings
from ranch.protocol.sdnotify import Notifier
from ranch.protocol.versions import CURRENT, SUPPORTED

log = logging.getLogger("rnoded")

SPOOL_ENV = "RANCH_SPOOL_DIR"
VERSION_ENV = "RANCH_PROTOCOL_VERSION"  # speak an older protocol version (upgrade tests)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rnoded", description="Ranch node daemon: joins the controller at --server."
    )
    p.add_argument("--server", metavar="HOST:PORT",
                   help="controller address (port 6817); several, comma-separated, are tried "
                        "in order (a controller pair)")
    p.add_argument("--name", help="node name (default: short hostname)")
    p.add_argument("--key-file", help="cluster key file (default: $RANCH_KEY_FILE)")
    p.add_argument("--fake-gpus", type=int, metavar="N", help="pretend to have N GPUs")
    p.add_argument("--spool-dir",
                   help="config cache and job state (default: /var/spool/ranch/NAME as root)")
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="log lines as text (UTC time, level, message) or one JSON object each")
    p.add_argument("--log-file", metavar="FILE",
                   help="append the log to FILE, reopened on SIGUSR2 and SIGHUP (default: the "
                        "controller's SlurmdLogFile, else stderr)")
    p.add_argument("--dynamic", "-Z", action="store_true",
                   help="join although the config does not name this node (needs MaxNodeCount)")
    p.add_argument("--conf", metavar="KEYS", default="",
                   help='with --dynamic: extra NodeName keys, e.g. "Features=a,b Gres=gpu:2"')
    p.add_argument("-b", dest="boot_now", action="store_true",
                   help="report this daemon's start as the node's boot time, as if the node had "
                        "just rebooted (testing, like slurmd -b)")
    p.add_argument(
        "-C",
        dest="print_hardware",
        action="store_true",
        help="print the detected hardware like `slurmd -C` and exit",
    )
    p.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    return p


def default_spool_dir(name: str) -> str:
    if os.environ.get(SPOOL_ENV):
        return os.path.join(os.environ[SPOOL_ENV], name)
    if os.geteuid() == 0:
        return f"/var/spool/ranch/{name}"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return os.path.join(state, "ranch", name)


def protocol_version() -> int:
    text = os.environ.get(VERSION_ENV, "")
    if not text:
        return CURRENT
    if not text.isdigit() or int(text) not in SUPPORTED:
        raise ValueError(f"{VERSION_ENV}={text!r}: expected one of {SUPPORTED}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.version:
        from ranch.protocol.release import version_text

        print(version_text())
        return 0
    name = args.name or short_hostname()
    if args.fake_gpus is not None and args.fake_gpus < 0:
        print("rnoded: --fake-gpus must be 0 or more", file=sys.stderr)
        return 2
    try:
        gpus = open_gpus(name, args.fake_gpus)
    except ValueError as exc:
        print(f"rnoded: {exc}", file=sys.stderr)
        return 2
    if args.print_hardware:
        sys.stdout.write(slurmd_c_text(name, probe_hardware(gpus), psutil.boot_time()))
        return 0
    if not args.server:
        print("rnoded: --server HOST:PORT is required", file=sys.stderr)
        return 2
    if args.conf and not args.dynamic:
        print("rnoded: --conf applies only with --dynamic", file=sys.stderr)
        return 2
    sink = _open_log(args.log_format, args.log_file)
    if sink is None:
        return 1
    try:
        servers = tuple(parse_address(x) for x in args.server.split(",") if x.strip())
        if not servers:
            raise ValueError("--server: no address given")
        key = load_key(resolve_key_path(args.key_file))
        version = protocol_version()
    except (ValueError, KeyFileError) as exc:
        log.error("%s", exc)
        return 2
    # Resolved once, here: jobs run in their own directories, and a relative spool read from
    # there is another place (every launch failed).
    spool_dir = os.path.abspath(args.spool_dir or default_spool_dir(name))
    lock = _lock_spool(spool_dir)  # held (open) until the process exits
    if lock is None:
        return 1
    opts = NodeOptions(
        server=servers[0],
        servers=servers,
        name=name,
        key=key,
        spool_dir=spool_dir,
        protocol_version=version,
        dynamic=args.dynamic,
        dynamic_conf=args.conf,
        boot_time=time.time() if args.boot_now else None,
    )
    logs = DaemonLog(sink, name, fixed=args.log_file is not None)
    try:
        trio.run(serve, NodeDaemon(opts, gpus, on_settings=logs.settings), logs, Notifier())
    finally:
        os.close(lock)
    return 0


def _open_log(log_format: str, path: str | None) -> LogSink | None:
    """The log set up, or None once the reason it cannot be is printed."""
    try:
        return setup_logging(log_format, path=path)
    except OSError as exc:
        print(f"rnoded: cannot open log file {path}: {exc.strerror or exc}", file=sys.stderr)
        return None


def _lock_spool(spool_dir: str) -> int | None:
    """The spool's lock, or None once the reason it cannot be had is printed."""
    try:
        return lock_spool(spool_dir)
    except SpoolBusy as exc:
        print(f"rnoded: {exc}", file=sys.stderr)
    except OSError as exc:
        print(f"rnoded: cannot lock spool dir {spool_dir}: {exc.strerror or exc}",
              file=sys.stderr)
    return None


class DaemonLog:
    """rnoded's log file: --log-file, else the SlurmdLogFile its controller serves (`%n` the
    node's name, `%h` the host's, as slurmd expands them)."""

    def __init__(self, sink: LogSink, node: str, *, fixed: bool) -> None:
        self.sink, self.node, self.fixed = sink, node, fixed

    def settings(self, settings: NodeSettings) -> None:
        if self.fixed or not settings.log_file:
            return
        want = settings.log_file.replace("%n", self.node).replace("%h", short_hostname())
        if os.path.abspath(want) == self.sink.path:
            return
        log.info("logging to %s (SlurmdLogFile)", want)
        try:
            self.sink.retarget(want)
        except OSError as exc:
            log.error("cannot open SlurmdLogFile %s: %s; logging stays where it was", want,
                      exc.strerror or exc)

    def reopen(self, why: str) -> None:
        if self.sink.path is None:
            log.info("%s: log on stderr; nothing to reopen", why)
            return
        try:
            self.sink.reopen()
        except OSError as exc:
            log.error("%s: cannot reopen %s: %s; writing to the old file", why, self.sink.path,
                      exc.strerror or exc)
            return
        log.info("%s: log file %s reopened", why, self.sink.path)


async def serve(daemon: NodeDaemon, logs: DaemonLog, notifier: Notifier) -> None:
    """Run the daemon until a signal stops it. SIGTERM/SIGINT (a restart, an upgrade) stop the
    daemon, not the node: its jobs run on and the next rnoded adopts them. SIGUSR1: the node
    leaves (the controller DOWNs it and requeues its jobs), then rnoded stops. SIGHUP: reopen
    the log, register afresh (the config served again); SIGUSR2: reopen the log."""
    name = daemon.opts.name
    log.info("rnoded %s starting, controller %s:%d, spool %s", name, *daemon.opts.server,
             daemon.opts.spool_dir)
    handled = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP, signal.SIGUSR2,
               signal.SIGPIPE)
    with trio.open_signal_receiver(*handled) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(daemon.run)
            notifier.ready(f"node {name}")
            async for signum in signals:
                sig = signal.Signals(signum).name
                if signum in (signal.SIGTERM, signal.SIGINT):
                    log.info("received %s: stopping; the node's jobs run on", sig)
                elif signum == signal.SIGUSR1:
                    log.info("received %s: node %s leaves the cluster", sig, name)
                    daemon.leave(f"rnoded {sig}: node leaving")
                elif signum == signal.SIGHUP:
                    notifier.reloading()
                    logs.reopen(sig)
                    daemon.refetch()
                    notifier.ready(f"node {name}")
                    continue
                elif signum == signal.SIGUSR2:
                    logs.reopen(sig)
                    continue
                else:
                    log.warning("received %s: ignored", sig)
                    continue
                notifier.stopping()
                daemon.steps.stop()  # a frame under way to rrun finishes first
                nursery.cancel_scope.cancel()
                break
    log.info("rnoded %s stopped", name)


if __name__ == "__main__":
    sys.exit(main())
