"""Parsed lines -> validated ClusterConfig: includes, line kinds, DEFAULT lines, Slurm's rules.

Per-node work is kept out of the hot loop: a NodeName line's values are typed and checked once,
then one record per expanded name is created from them.
"""

from __future__ import annotations

import hashlib
import os

import attrs

from ranch.conf import keys, prioritysettings
from ranch.conf.buildbase import Source
from ranch.conf.errors import ConfDiagnostic, ConfigError
from ranch.conf.model import ClusterConfig, PartitionConfig
from ranch.conf.nodelines import NodeLines
from ranch.conf.parser import Include, Pair, parse_text
from ranch.conf.partlines import PartitionLines
from ranch.conf.relaylines import RelayLines


class _Builder(NodeLines, PartitionLines, RelayLines):
    """Reads the files, sends each line to its kind, assembles the ClusterConfig."""

    # -- reading ----------------------------------------------------------------------------

    def read(self, src: Source, chain: tuple[str, ...]) -> None:
        self.files.append((os.path.relpath(src.abspath, self.base_dir)
                           if not src.abspath.startswith("<") else src.abspath, src.text))
        items, problems = parse_text(src.text)
        for prob in problems:
            self.error(src, prob.line, prob.col, prob.message)
        for item in items:
            if isinstance(item, Include):
                self.include(src, item, chain)
                continue
            self.lines.append((src, item))
            for p in item:
                if p.key.lower() == "clustername":
                    self.cluster_for_include = p.value.strip().lower()

    def include(self, src: Source, inc: Include, chain: tuple[str, ...]) -> None:
        name = inc.path
        if "%c" in name:
            if self.cluster_for_include is None:
                self.error(src, inc.line, inc.col, "Include uses %c but ClusterName is not set yet")
                return
            name = name.replace("%c", self.cluster_for_include)
        if any(c in name for c in "*?["):
            self.warn(src, inc.line, inc.col,
                      f"Include {name!r}: wildcards are not supported, line skipped")
            return
        here = os.path.dirname(src.abspath) if not src.abspath.startswith("<") else self.base_dir
        target = os.path.normpath(os.path.join(here, name))
        display = name if os.path.isabs(name) else os.path.normpath(
            os.path.join(os.path.dirname(src.display), name))
        if target in chain:
            loop = " -> ".join([*(os.path.basename(c) for c in chain), os.path.basename(target)])
            self.error(src, inc.line, inc.col, f"Include cycle: {loop}")
            return
        try:
            with open(target, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            self.error(src, inc.line, inc.col, f"cannot read included file {name!r}: {why}")
            return
        self.read(Source(display, target, text), (*chain, target))

    # -- line kinds -------------------------------------------------------------------------

    def build(self) -> ClusterConfig:
        part_lines: list[tuple[Source, list[Pair]]] = []
        down_lines: list[tuple[Source, list[Pair]]] = []
        nodeset_lines: list[tuple[Source, list[Pair]]] = []
        for src, pairs in self.lines:
            kind = pairs[0].key.lower()
            if kind == "nodename":
                self.node_line(src, pairs)
            elif kind == "partitionname":
                part_lines.append((src, pairs))
            elif kind == "downnodes":
                down_lines.append((src, pairs))
            elif kind == "nodeset":
                nodeset_lines.append((src, pairs))
            elif kind in ("frontendname",):
                self.ignored.setdefault(keys.GLOBAL_KEYS[kind].name)
            else:
                for p in pairs:
                    self.global_pair(src, p)
        order = {n.name: i for i, n in enumerate(self.nodes)}
        nodesets = self.nodesets(nodeset_lines)
        defined = [p for p in (self.partition_line(s, ps, order, nodesets)
                               for s, ps in part_lines) if p is not None]
        partitions = self.check_partitions(defined)
        for src, pairs in down_lines:
            self.down_line(src, pairs, order)
        cfg = self.settings_to_config(partitions)
        if self.errors:
            raise ConfigError(self.errors, self.warnings)
        return cfg

    def settings_to_config(self, partitions: list[PartitionConfig]) -> ClusterConfig:
        g = self.typed_global
        # in this order: their diagnostics are listed in the order the areas are read
        control, timeouts, health = self.control_settings(), self.timeouts(), self.health_settings()
        power = self.power_settings({p.name for p in partitions})
        auth, http = self.auth_settings(), self.http_settings()
        membership, jobs = self.membership_settings(), self.job_settings()
        guards, reboot = self.guard_settings(), self.reboot_settings()
        access, accounting = self.access_settings(), self.accounting_settings()
        scheduler, preempt = self.scheduler_settings(), self.preempt_settings()
        priority = prioritysettings.priority_settings(
            g, self.globals["SchedulerParameters"][1].value
            if "SchedulerParameters" in self.globals else "")
        relays = self.relay_nodes()
        self.ignored.pop("DisableRootJobs", None)  # a partition's is acted on too
        for name in ("QOS", "AllowAccounts", "DenyAccounts", "AllowQos", "DenyQos"):
            self.ignored.pop(name, None)  # AccountingStorageEnforce's (assoc/partpolicy.py)
        if access.disable_root_jobs:  # a partition without its own inherits it, as in Slurm
            partitions = [p if any(k == "DisableRootJobs" for k, _ in p.options)
                          else attrs.evolve(p, options=(*p.options, ("DisableRootJobs", "YES")))
                          for p in partitions]
        settings: list[tuple[str, str]] = []
        for name, (_, p, _) in self.globals.items():
            if name in ("SlurmctldHost", "ControlMachine", "BackupController"):
                continue
            settings.append((name, p.value))
        settings[:0] = [(keys.GLOBAL_KEYS[p.key.lower()].name, p.value) for p, _ in self.ctl_hosts]
        digest = hashlib.sha256()
        for _, text in self.files:
            digest.update(text.encode())
        return ClusterConfig(
            path=self.path, config_hash=digest.hexdigest(), files=tuple(self.files),
            cluster_name=g("ClusterName", "cluster") or "cluster", control=control,
            timeouts=timeouts, health=health, power=power, auth=auth, http=http,
            nodes=tuple(self.nodes),
            partitions=tuple(partitions), settings=tuple(settings),
            ignored=tuple(self.ignored), warnings=tuple(self.warnings), membership=membership,
            jobs=jobs, guards=guards, access=access, reboot=reboot,
            accounting=accounting, scheduler=scheduler, priority=priority, relays=relays,
            preempt=preempt)


def _build(path: str, abspath: str, text: str, base_dir: str, strict: bool) -> ClusterConfig:
    b = _Builder(path, base_dir, strict)
    b.read(Source(path, abspath, text), (abspath,))
    return b.build()


def load_config(path: str | os.PathLike[str], *, strict: bool = False) -> ClusterConfig:
    """Read, parse and validate a cluster.conf and its includes; raises ConfigError."""
    path = os.fspath(path)
    abspath = os.path.abspath(path)
    try:
        with open(abspath, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError([ConfDiagnostic(path, 0, 0, f"cannot read config file: {why}")]) from None
    return _build(path, abspath, text, os.path.dirname(abspath), strict)


def parse_config_text(text: str, *, path: str = "<string>", strict: bool = False) -> ClusterConfig:
    """Parse and validate config text; includes and relative paths resolve against `path`'s
    directory (the current directory for "<string>")."""
    if path.startswith("<"):
        return _build(path, path, text, os.getcwd(), strict)
    abspath = os.path.abspath(path)
    return _build(path, abspath, text, os.path.dirname(abspath), strict)
