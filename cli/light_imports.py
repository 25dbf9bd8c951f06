"""Import single modules of the pure cores without running their package __init__.py.

conf/__init__.py loads the config parser and with it lark (~90 ms), statemachine/__init__.py the
whole transition table; a command needs one or two helpers of each and pays every import on
every run.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from types import ModuleType


def _bare_package(name: str) -> None:
    """Register `name` as a package whose __init__ has not run, so that its submodules import
    alone. A later `import name` still finds this object; callers import submodules only."""
    if name in sys.modules:
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(here, name)
    if not os.path.isfile(os.path.join(path, "__init__.py")):
        return  # installed elsewhere: let the normal import run
    pkg = types.ModuleType(name)
    pkg.__path__ = [path]
    pkg.__package__ = name
    sys.modules[name] = pkg


def conf_module(sub: str) -> ModuleType:
    """conf.<sub> (hostlist, timefmt, build, errors) without conf's package-level imports."""
    _bare_package("conf")
    return importlib.import_module(f"conf.{sub}")


def statemachine_module(sub: str) -> ModuleType:
    """statemachine.<sub> (names, events) without the package-level imports."""
    _bare_package("statemachine")
    return importlib.import_module(f"statemachine.{sub}")


def fold(names: list[str], sort: bool = True) -> str:
    return conf_module("hostlist").fold(names, sort=sort)


def expand(expr: str) -> list[str]:
    return conf_module("hostlist").expand(expr)
