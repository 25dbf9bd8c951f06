"""The controller's reboot (issue 33): RebootProgram run as slurmd runs it, then rnoded stops."""

from __future__ import annotations

import logging
import os
import signal

import trio

from ranch.protocol.messages import NodeSettings

log = logging.getLogger("rnoded")


async def run_reboot_program(name: str, settings: NodeSettings | None, reason: str) -> None:
    """Run RebootProgram through the shell, verbatim (slurmd calls system() on it), with the
    node's name in SLURMD_NODENAME; with SlurmdParameters=shutdown_on_reboot the daemon then
    stops as on SIGTERM, so that a RebootProgram that did not reboot still takes the node out."""
    program = settings.reboot_program if settings else None
    if not program:
        log.error("reboot requested but RebootProgram isn't defined in config")
        return
    log.info("node reboot request being processed (%s): %s", reason or "no reason", program)
    env = dict(os.environ, SLURMD_NODENAME=name)
    try:
        done = await trio.run_process(["/bin/sh", "-c", program], check=False, env=env,
                                      stdin=b"")
    except OSError as exc:
        log.error("cannot run RebootProgram %s: %s", program, exc)
    else:
        if done.returncode:
            log.error("RebootProgram %s returned %d", program, done.returncode)
    if settings is not None and settings.shutdown_on_reboot:
        log.info("shutdown_on_reboot: stopping")
        os.kill(os.getpid(), signal.SIGTERM)
