"""conf: cluster.conf (Slurm's slurm.conf syntax) -> validated, typed ClusterConfig. Pure."""

from conf.build import load_config, parse_config_text
from conf.errors import ConfDiagnostic, ConfigError
from conf.model import (
    AuthSettings,
    ClusterConfig,
    ControllerHost,
    ControlSettings,
    ExcNodes,
    Gres,
    HealthSettings,
    NodeConfig,
    PartitionConfig,
    PowerSettings,
    Timeouts,
)

__all__ = [
    "AuthSettings",
    "ClusterConfig",
    "ConfDiagnostic",
    "ConfigError",
    "ControlSettings",
    "ControllerHost",
    "ExcNodes",
    "Gres",
    "HealthSettings",
    "NodeConfig",
    "PartitionConfig",
    "PowerSettings",
    "Timeouts",
    "load_config",
    "parse_config_text",
]
