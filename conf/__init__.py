"""conf: cluster.conf (Slurm's slurm.conf syntax) -> validated, typed ClusterConfig. Pure.

Names load on first use (module __getattr__), so that `import conf.hostlist` or `conf.timefmt`
does not pay for the parser and lark.
"""

from __future__ import annotations

import sys

_WHERE = {
    "load_config": "conf.build",
    "parse_config_text": "conf.build",
    "ConfDiagnostic": "conf.errors",
    "ConfigError": "conf.errors",
    "AuthSettings": "conf.model",
    "ClusterConfig": "conf.model",
    "ControllerHost": "conf.model",
    "ControlSettings": "conf.model",
    "ExcNodes": "conf.model",
    "Gres": "conf.model",
    "HealthSettings": "conf.model",
    "NodeConfig": "conf.model",
    "PartitionConfig": "conf.model",
    "PowerSettings": "conf.model",
    "Timeouts": "conf.model",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'conf' has no attribute {name!r}")
    value = getattr(_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


def _module(name: str):  # -> ModuleType
    """importlib.import_module without importing importlib (a command's start pays for it)."""
    __import__(name)
    return sys.modules[name]
