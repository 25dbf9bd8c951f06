"""`rnoded`: the node daemon command line (configless: the controller address is all it needs)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

import psutil
import trio

from noded.gpus import open_gpus
from noded.hardware import probe_hardware, short_hostname, slurmd_c_text
from noded.logs import setup_logging
from noded.session import NodeDaemon, NodeOptions
from protocol.auth import KeyFileError, load_key, resolve_key_path
from protocol.client import parse_address
from protocol.versions import CURRENT, SUPPORTED

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
    p.add_argument("--spool-dir", help="config cache location (default: per node name)")
    p.add_argument("--log-format", choices=("text", "json"), default="text")
    p.add_argument("--dynamic", "-Z", action="store_true",
                   help="join although the config does not name this node (needs MaxNodeCount)")
    p.add_argument("--conf", metavar="KEYS", default="",
                   help='with --dynamic: extra NodeName keys, e.g. "Features=a,b Gres=gpu:2"')
    p.add_argument(
        "-C",
        dest="print_hardware",
        action="store_true",
        help="print the detected hardware like `slurmd -C` and exit",
    )
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
    setup_logging(args.log_format)
    try:
        servers = tuple(parse_address(x) for x in args.server.split(",") if x.strip())
        if not servers:
            raise ValueError("--server: no address given")
        server = servers[0]
        key = load_key(resolve_key_path(args.key_file))
        version = protocol_version()
    except (ValueError, KeyFileError) as exc:
        log.error("%s", exc)
        return 2
    opts = NodeOptions(
        server=server,
        servers=servers,
        name=name,
        key=key,
        spool_dir=args.spool_dir or default_spool_dir(name),
        protocol_version=version,
        dynamic=args.dynamic,
        dynamic_conf=args.conf,
    )
    trio.run(serve, NodeDaemon(opts, gpus))
    return 0


async def serve(daemon: NodeDaemon) -> None:
    """Run the daemon until SIGTERM/SIGINT, then let it say goodbye and return."""
    log.info("rnoded %s starting, controller %s:%d", daemon.opts.name, *daemon.opts.server)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(daemon.run)
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break
    log.info("rnoded %s stopped", daemon.opts.name)


if __name__ == "__main__":
    sys.exit(main())
