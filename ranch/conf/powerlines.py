"""Power-save settings: SuspendExcNodes, power_save_interval and the PowerSettings record."""

from __future__ import annotations

import re

from ranch.conf.buildbase import few
from ranch.conf.globalsettings import GlobalSettings
from ranch.conf.model import ExcNodes, PowerSettings
from ranch.conf.values import split_top


class PowerLines(GlobalSettings):
    """The power-save settings, read from several global keys."""

    def power_settings(self, part_names: set[str]) -> PowerSettings:
        g = self.typed_global
        exc_parts = g("SuspendExcParts", ())
        unknown_parts = [x for x in exc_parts if x not in part_names]
        if unknown_parts:
            _, p, src = self.globals["SuspendExcParts"]
            self.warn(src, p.vline, p.vcol, f"SuspendExcParts names unknown partition(s) "
                      f"{', '.join(unknown_parts)}")
        return PowerSettings(
            g("SuspendProgram", None), g("ResumeProgram", None), g("ResumeFailProgram", None),
            g("SuspendTime", None), g("SuspendTimeout", 30), g("ResumeTimeout", 60),
            g("SuspendRate", 60), g("ResumeRate", 300), self.exc_nodes(), exc_parts,
            g("SuspendExcStates", ()), self.power_save_interval())

    def exc_nodes(self) -> tuple[ExcNodes, ...]:
        got = self.globals.get("SuspendExcNodes")
        if got is None:
            return ()
        _, p, src = got
        out: list[ExcNodes] = []
        pending: list[str] = []
        offset = 0
        for part in split_top(p.value):
            item = part.strip()
            lead = len(part) - len(part.lstrip())
            count: int | None = None
            m = re.fullmatch(r"(.*):(\d+)", item)
            if m:
                item, count = m.group(1), int(m.group(2))
            if item:
                names = self.expand_at(src, p, item, offset + lead)
                if names is not None:
                    pending.extend(names)
            if count is not None:
                out.append(ExcNodes(tuple(pending), count))
                pending = []
            offset += len(part) + 1
        if pending:
            out.append(ExcNodes(tuple(pending), None))
        known = self.node_where
        missing = [n for e in out for n in e.nodes if n not in known]
        if missing:
            self.warn(src, p.vline, p.vcol,
                      f"SuspendExcNodes names undefined node(s) {few(missing)}")
        return tuple(out)

    def power_save_interval(self) -> int:
        """SlurmctldParameters=...,power_save_interval=N,...: seconds between power-save
        passes (at least 1; Slurm's default 10)."""
        got = self.globals.get("SlurmctldParameters")
        if got is None:
            return 10
        _, p, src = got
        for option in p.value.split(","):
            name, _, number = option.partition("=")
            if name.strip().lower() != "power_save_interval":
                continue
            if not number.strip().isdigit():
                self.warn(src, p.vline, p.vcol, f"SlurmctldParameters: power_save_interval="
                          f"{number.strip()!r} is not a whole number of seconds; using 10")
                return 10
            return max(1, int(number))
        return 10
