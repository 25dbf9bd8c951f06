"""The config as the job side reads it, and the figures it derives from it (set again by
`use` at a reconfigure)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ranch.conf.model import ClusterConfig


class JobSettings:
    """The config in force for the job side's components, and what follows from it."""

    def __init__(self, config: ClusterConfig) -> None:
        self.use(config)

    def use(self, config: ClusterConfig) -> None:
        self.config = config
        self.index = {n.name: i for i, n in enumerate(config.nodes)}  # config order
        self.kill_wait = float(config.jobs.kill_wait)
        self.min_job_age = float(config.jobs.min_job_age)
        # A running job a node's heartbeats leave out for this long was lost there (its
        # LaunchJob went astray, the node lost it without an ending...).
        t = config.timeouts
        self.missing_grace = 3.0 * t.heartbeat_interval + t.message_timeout
