"""rcontrol's commands to the controller itself: reconfigure, takeover and ping (each controller
of the pair, as scontrol ping shows them)."""

from __future__ import annotations

import os
import sys

from ranch.cli.controller import CliError, Target, ask
from ranch.cli.slurm_names import prog


def reconfigure(target: Target) -> int:
    import getpass

    result = ask(target, "Reconfigure", {"user": getpass.getuser()}, want="ReconfigureResult")
    for warning in result.get("warnings") or ():  # the new config's, as rctld logged them
        print(f"{prog('rcontrol')}: warning: {warning}", file=sys.stderr)
    if result.get("ok") is True:
        return 0
    print(f"{prog('rcontrol')}: error: reconfigure failed; the controller keeps its running config",
          file=sys.stderr)
    for err in result.get("errors") or ():
        print(err, file=sys.stderr)
    return 1


def takeover(target: Target) -> int:
    """scontrol takeover: the controller that serves hands over to a standby (silent, as
    scontrol is, when done)."""
    import getpass

    ask(target, "Takeover", {"user": getpass.getuser()}, want="Ack")
    return 0


def ping(target: Target) -> int:
    """Each controller as scontrol ping shows it: primary, then backup (backup1, backup2, ...
    when there are more than two), UP or DOWN. A standby answers a ping too: UP. As measured
    on Slurm 22.05 (tests/conformance/test_ping.py): nothing on stderr, exit 1 only when no
    controller is UP, and for root a banner under the lines when one is DOWN."""
    controllers = target.controllers
    up = 0
    for i, (name, host, port) in enumerate(controllers):
        mode = "primary" if i == 0 else "backup" if len(controllers) == 2 else f"backup{i}"
        one = Target(host, port, target.key_path, target.origin, target.munge)
        try:
            ask(one, "Ping", want="Pong", timeout=5.0)
            state = "UP"
            up += 1
        except CliError:
            state = "DOWN"
        print(f"Slurmctld({mode}) at {_shown_host(name)} is {state}")
    if up < len(controllers) and os.getuid() == 0:
        print("*****************************************\n"
              "** RESTORE SLURMCTLD DAEMON TO SERVICE **\n"
              "*****************************************")
    return 0 if up else 1


def _shown_host(name: str) -> str:
    """Slurm's read_config names a SlurmctldHost of "localhost" by this host's short name."""
    if name != "localhost":
        return name
    import socket

    return socket.gethostname().split(".")[0]
