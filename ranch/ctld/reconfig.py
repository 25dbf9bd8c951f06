"""What `rcontrol reconfigure` and SIGHUP check before a new config is applied: it must load
(else the running one is kept, each error logged and answered), and what only a restart changes
is said in a warning."""

from __future__ import annotations

import logging

import trio

from ranch.conf.build import load_config
from ranch.conf.errors import ConfigError
from ranch.conf.model import ClusterConfig
from ranch.ctld import logs
from ranch.protocol import messages as m


def format_errors(exc: ConfigError) -> tuple[str, ...]:
    return tuple(f"{d.path}:{d.line}:{d.col}: {d.message}" for d in exc.errors)


async def read_new(path: str, old: ClusterConfig, who: str
                   ) -> ClusterConfig | m.ReconfigureResult:
    """The config at `path`, or the refusal to answer (the running config kept, logged)."""
    try:
        return await trio.to_thread.run_sync(load_config, path)
    except ConfigError as exc:
        errors = format_errors(exc)
        for err in errors:
            logs.event("reconfigure refused; keeping the running config",
                       logging.ERROR, by=who, error=err)
        return m.ReconfigureResult(ok=False, errors=errors, config_hash=old.config_hash)
    except OSError as exc:
        err = f"{path}: {exc.strerror or exc}"
        logs.event("reconfigure refused; keeping the running config", logging.ERROR,
                   by=who, error=err)
        return m.ReconfigureResult(ok=False, errors=(err,), config_hash=old.config_hash)


def warnings(old: ClusterConfig, new: ClusterConfig) -> list[str]:
    """The new config's own warnings, and the changes that take effect at restart only
    (logged here; the caller answers them)."""
    out = [w.format().splitlines()[0] for w in new.warnings]
    if (new.control.port, new.control.hosts) != (old.control.port, old.control.hosts):
        out.append("controller address changed in the config; takes effect at restart")
    if new.http != old.http:
        out.append("Http* keys changed in the config; take effect at restart")
    if new.control.log_file != old.control.log_file:
        out.append("SlurmctldLogFile changed in the config; takes effect at restart")
    for warning in out:
        logs.event("reconfigure warning", logging.WARNING, detail=warning)
    return out
