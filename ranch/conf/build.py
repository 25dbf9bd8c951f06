"""Parsed lines -> validated ClusterConfig: includes, line kinds, DEFAULT lines, Slurm's rules.

Per-node work is kept out of the hot loop: a NodeName line's values are typed and checked once,
then one record per expanded name is created from them.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from itertools import repeat
from typing import Any

import attrs

from ranch.conf import keys
from ranch.conf.errors import ConfDiagnostic, ConfigError
from ranch.conf.hostlist import HostlistError, expand
from ranch.conf.model import (
    AccessSettings,
    AuthSettings,
    ClusterConfig,
    ControllerHost,
    ControlSettings,
    ExcNodes,
    GuardSettings,
    HealthSettings,
    HttpSettings,
    JobSettings,
    MembershipSettings,
    NodeConfig,
    PartitionConfig,
    PowerSettings,
    RebootSettings,
    Timeouts,
)
from ranch.conf.parser import Include, Pair, parse_text
from ranch.conf.refused import REFUSES, partition_key_verdict, slurm_verdict
from ranch.conf.values import (
    DOWN_STATES,
    ENFORCE,
    HEALTH_NODE_STATES,
    HTTP_AUTH,
    NODE_STATES,
    PARTITION_STATES,
    SUSPEND_EXC_STATES,
    BadValue,
    as_bool,
    as_endpoints,
    as_enum,
    as_enum_list,
    as_etcd_prefix,
    as_int,
    as_list,
    as_listen,
    as_port_range,
    as_purge_age,
    as_seconds_or_infinite,
    as_time,
    parse_gres,
    split_top,
)

_RESOLVED_PATHS = ("HealthCheckProgram", "SuspendProgram", "ResumeProgram", "ResumeFailProgram",
                   "RebootProgram",
                   "AuthKeyFile", "StateSaveLocation", "HttpTokenFile")
_MAX_HOSTS_SHOWN = 5
_CTL_HOST_RE = re.compile(r"^([^()\s]+)(?:\(([^()\s]+)\))?$")


def _few(names: list[str]) -> str:
    """The first few names of a long list, for messages."""
    shown = ", ".join(names[:_MAX_HOSTS_SHOWN])
    extra = len(names) - _MAX_HOSTS_SHOWN
    return f"{shown} and {extra} more" if extra > 0 else shown


class _Source:
    """One file read: the name used in diagnostics and its text (split into lines on demand)."""

    __slots__ = ("_lines", "abspath", "display", "text")

    def __init__(self, display: str, abspath: str, text: str) -> None:
        self.display, self.abspath, self.text = display, abspath, text
        self._lines: list[str] | None = None

    def line(self, n: int) -> str:
        if self._lines is None:
            self._lines = self.text.split("\n")
        return self._lines[n - 1] if 0 < n <= len(self._lines) else ""


_NODE_CONVERT: dict[str, Callable[[str], Any]] = {
    "Port": lambda s: as_int(s, 1, 65535),
    "CPUs": lambda s: as_int(s, 1),
    "Procs": lambda s: as_int(s, 1),
    "Boards": lambda s: as_int(s, 1),
    "Sockets": lambda s: as_int(s, 1),
    "SocketsPerBoard": lambda s: as_int(s, 1),
    "CoresPerSocket": lambda s: as_int(s, 1),
    "ThreadsPerCore": lambda s: as_int(s, 1),
    "RealMemory": lambda s: as_int(s, 0),
    "TmpDisk": lambda s: as_int(s, 0),
    "Weight": lambda s: as_int(s, 0),
    "Gres": parse_gres,
    "Features": as_list,
    "Feature": as_list,
    # slurmctld 22.05 also starts with State=IDLE (see node_line).
    "State": lambda s: as_enum(s, (*NODE_STATES, "IDLE")),
    "Reason": str,
    "NodeHostname": str,
    "NodeAddr": str,
    "SuspendTime": lambda s: _own_suspend_time(s),
}

# Old or alternative spellings that set the same node value. Procs is not one: Slurm reads
# CPUs whenever it is given (on the line or its DEFAULT) and Procs only without it.
_NODE_ALIASES = {"Feature": "Features"}

_PART_CONVERT: dict[str, Callable[[str], Any]] = {
    "Nodes": str,
    "Default": as_bool,
    "Hidden": as_bool,
    "State": lambda s: as_enum(s, PARTITION_STATES),
    "MaxTime": as_time,
    "DefaultTime": as_time,
    "SuspendTime": lambda s: _own_suspend_time(s),
}


def _own_suspend_time(text: str) -> int:
    """A node's or partition's SuspendTime: seconds, or -1 for INFINITE (never suspended)."""
    seconds = as_seconds_or_infinite(text)
    return -1 if seconds is None else seconds

_GLOBAL_CONVERT: dict[str, Callable[[str], Any]] = {
    "ClusterName": lambda s: s.strip().lower(),
    "SlurmctldPort": lambda s: as_int(s.split("-", 1)[0], 1, 65535),
    "SrunPortRange": as_port_range,
    "SlurmdTimeout": lambda s: as_int(s, 0, 65533),
    "MessageTimeout": lambda s: as_int(s, 1),
    "ReturnToService": lambda s: as_int(s, 0, 2),
    "HeartbeatInterval": lambda s: as_int(s, 1),
    "HealthCheckInterval": lambda s: as_int(s, 0),
    "HealthCheckTimeout": lambda s: as_int(s, 1, 65535),
    "HealthCheckNodeState": lambda s: as_enum_list(s, HEALTH_NODE_STATES),
    "SuspendTime": as_seconds_or_infinite,
    "SuspendTimeout": lambda s: as_int(s, 1, 65533),
    "ResumeTimeout": lambda s: as_int(s, 1, 65533),
    "RebootUnhealthyMax": lambda s: as_int(s, 0, 1000),
    "SuspendRate": lambda s: as_int(s, 0),
    "ResumeRate": lambda s: as_int(s, 0),
    "SuspendExcParts": as_list,
    "SuspendExcStates": lambda s: as_enum_list(s, SUSPEND_EXC_STATES),
    "NodeApproval": lambda s: as_enum(s, ("AUTO", "MANUAL")).lower(),
    "HttpListen": as_listen,
    "StateStore": lambda s: as_enum(s, ("FILE", "ETCD")).lower(),
    "EtcdEndpoints": as_endpoints,
    "EtcdPrefix": as_etcd_prefix,
    "EtcdLeaseTTL": lambda s: as_int(s, 2, 3600),
    "HttpAuth": lambda s: as_enum(s, HTTP_AUTH).lower(),
    "MaxNodeCount": lambda s: as_int(s, 0),
    "EventLogMaxEvents": lambda s: as_int(s, 1),
    "EventLogMaxAge": lambda s: as_int(s, 1),
    "KillWait": lambda s: as_int(s, 0, 65533),
    "InactiveLimit": lambda s: as_int(s, 0, 65533),
    "MinJobAge": lambda s: as_int(s, 0),
    "PurgeJobAfter": as_purge_age,
    "MaxJobCount": lambda s: as_int(s, 1),
    "MaxArraySize": lambda s: as_int(s, 0, 4000001),
    "EnforcePartLimits": lambda s: as_enum(s, ENFORCE).replace("YES", "ALL"),
    "DownGuardPercent": lambda s: as_int(s, 0, 100),
    "DownGuardWindow": lambda s: as_int(s, 0, 65533),
    "DownGuardMinNodes": lambda s: as_int(s, 2),
    "DrainGuardPercent": lambda s: as_int(s, 0, 100),
    "DrainGuardWindow": lambda s: as_int(s, 1),
    "DrainGuardMinNodes": lambda s: as_int(s, 2),
    "AuthType": lambda s: as_enum(s, AUTH_TYPES).lower(),
    "AdminUsers": as_list,
    "PrivateData": lambda s: tuple(w.lower() for w in as_enum_list(s, PRIVATE_DATA)),
    "DisableRootJobs": as_bool,
    "SlurmUser": lambda s: s.strip() or "root",
}
# AuthType values Ranch acts on (unset: the cluster key alone)
AUTH_TYPES: tuple[str, ...] = ("AUTH/MUNGE",)
# slurm.conf's PrivateData words; Ranch hides jobs, nodes and usage (and events with nodes)
PRIVATE_DATA: tuple[str, ...] = ("ACCOUNTS", "CLOUD", "EVENTS", "JOBS", "NODES", "PARTITIONS",
                                 "RESERVATIONS", "USAGE", "USERS")

# A value as written, where it was written, and its typed form.
_Val = tuple[Any, Pair, _Source]


class _Builder:
    def __init__(self, path: str, base_dir: str, strict: bool) -> None:
        self.path = path
        self.base_dir = base_dir
        self.strict = strict
        self.errors: list[ConfDiagnostic] = []
        self.warnings: list[ConfDiagnostic] = []
        self.files: list[tuple[str, str]] = []
        self.lines: list[tuple[_Source, list[Pair]]] = []
        self.cluster_for_include: str | None = None
        self.globals: dict[str, tuple[keys.KeySpec, Pair, _Source]] = {}
        self.ctl_hosts: list[tuple[Pair, _Source]] = []
        self.ignored: dict[str, None] = {}
        self.nodes: list[NodeConfig] = []
        self.node_where: dict[str, tuple[_Source, int]] = {}
        # Names of node lines rejected for their own error: partitions naming them get no
        # follow-on "not defined" error (the line's own error already says what is wrong).
        self.rejected_nodes: set[str] = set()
        self.node_defaults: dict[str, _Val] = {}
        self.part_defaults: dict[str, _Val] = {}
        self.node_default_options: dict[str, str] = {}
        self.part_default_options: dict[str, str] = {}
        self.part_all = False  # the partition being built said Nodes=ALL
        self.part_dynamic: list[str] = []  # ... and named these not-yet-defined nodes

    # -- diagnostics ------------------------------------------------------------------------

    def error(self, src: _Source, line: int, col: int, msg: str) -> None:
        self.errors.append(ConfDiagnostic(src.display, line, col, msg, src.line(line)))

    def warn(self, src: _Source, line: int, col: int, msg: str) -> None:
        self.warnings.append(
            ConfDiagnostic(src.display, line, col, msg, src.line(line), "warning"))

    def slurm_refuses(self, src: _Source, line: int, col: int, said: str) -> None:
        """A setting slurmctld 22.05 will not start with: Ranch runs it, --strict refuses it."""
        msg = f"{REFUSES}: {said}"
        if self.strict:
            self.error(src, line, col, msg)
        else:
            self.warn(src, line, col, msg)

    def value_error(self, src: _Source, p: Pair, exc: ValueError) -> None:
        off = exc.offset if isinstance(exc, BadValue) else 0
        self.error(src, p.vline, p.vcol + off, f"{p.key}: {exc}")

    def unknown_key(self, src: _Source, p: Pair, table: dict[str, keys.KeySpec],
                    where: str) -> None:
        hint = keys.suggest(p.key, table)
        msg = f"unknown key {p.key!r}{where}"
        if hint:
            msg += f"; did you mean {hint!r}?"
        # slurmctld 22.05's words for it (s_p_parse_file): it will not start with the file
        said = f"{REFUSES}: Parsing error at unrecognized key: {p.key}"
        if self.strict:
            self.error(src, p.line, p.col, f"{msg} ({said})")
        else:
            self.warn(src, p.line, p.col, f"{msg} (ignored; {said})")

    # -- reading ----------------------------------------------------------------------------

    def read(self, src: _Source, chain: tuple[str, ...]) -> None:
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

    def include(self, src: _Source, inc: Include, chain: tuple[str, ...]) -> None:
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
        self.read(_Source(display, target, text), (*chain, target))

    # -- line kinds -------------------------------------------------------------------------

    def build(self) -> ClusterConfig:
        part_lines: list[tuple[_Source, list[Pair]]] = []
        down_lines: list[tuple[_Source, list[Pair]]] = []
        nodeset_lines: list[tuple[_Source, list[Pair]]] = []
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

    def typed_pairs(
        self, src: _Source, pairs: list[Pair], table: dict[str, keys.KeySpec],
        convert: dict[str, Callable[[str], Any]], where: str, aliases: dict[str, str] | None = None,
    ) -> tuple[dict[str, _Val], list[tuple[str, str]]]:
        """Type every pair of a line but the first; unknown keys warn, repeated keys warn."""
        vals: dict[str, _Val] = {}
        options: dict[str, str] = {}
        seen: dict[str, Pair] = {}
        for p in pairs[1:]:
            spec = table.get(p.key.lower())
            if spec is None:
                self.unknown_key(src, p, table, where)
                continue
            name = aliases.get(spec.name, spec.name) if aliases else spec.name
            if name in seen:
                self.warn(src, p.line, p.col, f"{name} specified more than once on this line, "
                          "latest value used")
            seen[name] = p
            fn = convert.get(name)
            if fn is None:
                options[name] = p.value
                self.ignored.setdefault(name)
                continue
            try:
                vals[name] = (fn(p.value), p, src)
            except ValueError as exc:
                self.value_error(src, p, exc)
        return vals, list(options.items())

    def expand_at(self, src: _Source, p: Pair, text: str | None = None,
                  offset: int = 0) -> list[str] | None:
        try:
            return expand(p.value if text is None else text)
        except HostlistError as exc:
            col = getattr(exc, "col", 0) or 0
            # The caret shows where; say what, without repeating the offset.
            what = getattr(exc, "message", None) or str(exc)
            self.error(src, p.vline, p.vcol + offset + col, f"{p.key}: bad hostlist: {what}")
            return None

    def node_line(self, src: _Source, pairs: list[Pair]) -> None:
        head = pairs[0]
        vals, options = self.typed_pairs(src, pairs, keys.NODE_KEYS, _NODE_CONVERT,
                                         " on a NodeName line", _NODE_ALIASES)
        expr = head.value.strip()
        if expr.upper() == "DEFAULT":
            for k in ("NodeHostname", "NodeAddr"):
                if k in vals:
                    _, p, s = vals.pop(k)
                    self.error(s, p.line, p.col, f"{k} cannot be set on NodeName=DEFAULT")
            self.node_defaults.update(vals)
            self.node_default_options.update(options)
            return
        if expr.upper() == "ALL":
            self.error(src, head.vline, head.vcol, "NodeName=ALL is reserved and cannot name nodes")
            return
        if not expr:
            self.error(src, head.vline, head.vcol, "NodeName needs a value")
            return
        names = self.expand_at(src, head)
        if names is None:
            return
        merged = {**self.node_defaults, **vals}
        opts = {**self.node_default_options, **dict(options)}
        hostnames = self.per_node(src, merged.get("NodeHostname"), names, "NodeHostname")
        addrs = self.per_node(src, merged.get("NodeAddr"), names, "NodeAddr")
        if hostnames is None or addrs is None:
            self.rejected_nodes.update(names)
            return
        if "NodeAddr" not in merged:
            addrs = hostnames
        hw = self.hardware(src, head, merged, vals)
        if hw is None:
            self.rejected_nodes.update(names)
            return
        self.check_duplicates(src, head, names)

        def get(k: str, default: Any) -> Any:
            v = merged.get(k)
            return default if v is None else v[0]

        port = get("Port", None)
        gres = get("Gres", ())
        features = get("Features", ())
        weight = get("Weight", 1)
        state = get("State", "UNKNOWN")
        if state == "IDLE":
            _, p, s = merged["State"]
            self.warn(s, p.vline, p.vcol, "State=IDLE: Ranch starts these nodes UNKNOWN; they "
                      "become IDLE when they register (slurmctld shows IDLE+NOT_RESPONDING "
                      "until then)")
            state = "UNKNOWN"
        reason = get("Reason", None)
        real_memory = get("RealMemory", 1)
        tmp_disk = get("TmpDisk", 0)
        cpus, boards, sockets, cores, threads = hw
        opt_t = tuple(opts.items())
        suspend_time = get("SuspendTime", None)
        make = NodeConfig
        self.nodes.extend(
            make(n, h, a, port, cpus, boards, sockets, cores, threads, real_memory, tmp_disk,
                 gres, features, weight, state, reason, opt_t, suspend_time)
            for n, h, a in zip(names, hostnames, addrs, strict=True))

    def per_node(self, src: _Source, val: _Val | None, names: list[str],
                 key: str) -> list[str] | None:
        if val is None:
            return names
        _, p, s = val
        got = self.expand_at(s, p)
        if got is None:
            return None
        if len(got) == 1 and len(names) > 1:
            return got * len(names)  # one host for them all, as slurmctld allows
        if len(got) != len(names):
            self.error(s, p.vline, p.vcol, f"{key} names {len(got)} host(s) but NodeName names "
                       f"{len(names)}; the counts must match (or give one for all)")
            return None
        return got

    def hardware(self, src: _Source, head: Pair, merged: dict[str, _Val],
                 own: dict[str, _Val]) -> tuple[int, int, int, int, int] | None:
        def get(k: str) -> int | None:
            v = merged.get(k)
            return None if v is None else v[0]

        boards = get("Boards") or 1
        cores = get("CoresPerSocket") or 1
        threads = get("ThreadsPerCore") or 1
        spb, sockets = get("SocketsPerBoard"), get("Sockets")
        if spb is not None and sockets is not None:
            # One inherited from a DEFAULT line gives way to the other set on this line.
            if "Sockets" in own and "SocketsPerBoard" not in own:
                spb = None
            elif "SocketsPerBoard" in own and "Sockets" not in own:
                sockets = None
            else:
                # slurmctld logs this and goes on with SocketsPerBoard.
                _, p, s = merged["SocketsPerBoard"]
                self.warn(s, p.line, p.col, "Sockets and SocketsPerBoard are mutually exclusive; "
                          "SocketsPerBoard used, as slurmctld does")
                sockets = None
        cpus_val = merged.get("CPUs") or merged.get("Procs")
        cpus = None if cpus_val is None else cpus_val[0]
        if spb is not None:
            sockets = boards * spb
        if sockets is None:
            # Slurm infers sockets from CPUs when they are not given.
            sockets = max(1, cpus // (cores * threads)) if cpus is not None else boards
        product = sockets * cores * threads
        if cpus is None:
            return product, boards, sockets, cores, threads
        if cpus not in (product, sockets * cores, sockets):
            # slurmctld logs this and runs with CPUs reset to the topology's product.
            assert cpus_val is not None  # cpus came from it
            _, p, s = cpus_val
            self.warn(s, p.vline, p.vcol,
                      f"{p.key}={cpus} matches none of Sockets ({sockets}), Sockets*CoresPerSocket "
                      f"({sockets * cores}) or Sockets*CoresPerSocket*ThreadsPerCore ({product}); "
                      f"CPUs reset to {product}, as slurmctld does")
            cpus = product
        return cpus, boards, sockets, cores, threads

    def check_duplicates(self, src: _Source, head: Pair, names: list[str]) -> None:
        where = self.node_where
        earlier = list(dict.fromkeys(n for n in names if n in where))
        first = where[earlier[0]] if earlier else None
        before = len(where)
        for n in earlier:
            del where[n]
        where.update(zip(names, repeat((src, head.line))))
        dups = list(earlier)
        if before - len(earlier) + len(names) != len(where):
            seen: set[str] = set()
            dups += [n for n in names if n in seen or seen.add(n)]  # type: ignore[func-returns-value]
            dups = list(dict.fromkeys(dups))
        if not dups:
            return
        if first is not None:
            for n in earlier:  # the first definition stays the one on record
                where[n] = first
        shown = _few(dups)
        at = f" (first defined at {first[0].display}:{first[1]})" if first else ""
        self.error(src, head.vline, head.vcol,
                   f"node(s) {shown} already defined; a node may appear on one NodeName line "
                   f"only{at}")

    def nodesets(self, lines: list[tuple[_Source, list[Pair]]]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for src, pairs in lines:
            head = pairs[0]
            vals, _ = self.typed_pairs(src, pairs, keys.NODESET_KEYS,
                                       {"Nodes": str, "Feature": str}, " on a NodeSet line")
            members: list[str] = []
            if "Nodes" in vals:
                _, p, s = vals["Nodes"]
                members = self.resolve_nodes(s, p, {n.name: i for i, n in enumerate(self.nodes)},
                                             {}) or []
            if "Feature" in vals:
                feat = vals["Feature"][0]
                members += [n.name for n in self.nodes if feat in n.features]
            out[head.value] = members
        return out

    # -- partitions -------------------------------------------------------------------------

    def resolve_nodes(self, src: _Source, p: Pair, order: dict[str, int],
                      nodesets: dict[str, list[str]]) -> list[str] | None:
        text = p.value
        if not text.strip():
            return []
        if text.strip().upper() == "ALL":
            self.part_all = True
            return [n.name for n in self.nodes]
        names: list[str] = []
        ok = True
        offset = 0
        for part in split_top(text):
            item = part.strip()
            lead = len(part) - len(part.lstrip())
            if item.upper() == "ALL":
                self.part_all = True
                names.extend(n.name for n in self.nodes)
            elif item in nodesets:
                names.extend(nodesets[item])
            elif item:
                got = self.expand_at(src, p, item, offset + lead)
                if got is None:
                    ok = False
                else:
                    missing = [n for n in got if n not in order]
                    if missing and self.rejected_nodes:
                        got = [n for n in got if n not in self.rejected_nodes]
                        missing = [n for n in missing if n not in self.rejected_nodes]
                    if missing and self.dynamic_allowed():
                        # names kept for dynamic nodes (issue 13): not members until they join
                        self.part_dynamic.extend(missing)
                        got = [n for n in got if n in order]
                    elif missing:
                        ok = False
                        self.error(src, p.vline, p.vcol + offset + lead,
                                   f"{p.key}: node(s) {_few(missing)} not defined by any "
                                   "NodeName line")
                    names.extend(got)
            offset += len(part) + 1
        if not ok:
            return None
        if len(names) <= 1:
            return names
        uniq = dict.fromkeys(names)
        return sorted(uniq, key=order.__getitem__)

    def partition_line(self, src: _Source, pairs: list[Pair], order: dict[str, int],
                       nodesets: dict[str, list[str]]) -> tuple[PartitionConfig, Pair,
                                                                _Source] | None:
        head = pairs[0]
        vals, options = self.typed_pairs(src, pairs, keys.PARTITION_KEYS, _PART_CONVERT,
                                         " on a PartitionName line")
        for name, value in options:
            if name == "DisableRootJobs":  # kept as written (show partition), checked here
                try:
                    as_bool(value)
                except ValueError as exc:
                    p = next(p for p in pairs if p.key.lower() == name.lower())
                    self.value_error(src, p, exc)
            said = partition_key_verdict(name)
            if said is not None:
                p = next(p for p in pairs if p.key.lower() == name.lower())
                self.slurm_refuses(src, p.line, p.col, said)
        name = head.value.strip()
        if name.upper() == "DEFAULT":
            self.part_defaults.update(vals)
            self.part_default_options.update(options)
            return None
        if not name:
            self.error(src, head.vline, head.vcol, "PartitionName needs a value")
            return None
        merged = {**self.part_defaults, **vals}
        opts = {**self.part_default_options, **dict(options)}
        nodes: list[str] = []
        self.part_all, self.part_dynamic = False, []
        if "Nodes" in merged:
            _, p, s = merged["Nodes"]
            got = self.resolve_nodes(s, p, order, nodesets)
            if got is None:
                return None
            nodes = got

        def get(k: str, default: Any) -> Any:
            v = merged.get(k)
            return default if v is None else v[0]

        max_time = get("MaxTime", None)
        default_time = get("DefaultTime", None)
        if default_time is not None and max_time is not None and default_time > max_time:
            # slurmctld logs this and runs with DefaultTime cleared for this partition only.
            self.warn(src, head.vline, head.vcol, f"partition {name} DefaultTime exceeds MaxTime "
                      f"({default_time} > {max_time}); DefaultTime cleared (NONE), as slurmctld "
                      "does")
            default_time = None
        part = PartitionConfig(name, tuple(nodes), get("Default", False), get("State", "UP"),
                               max_time, default_time, get("Hidden", False), tuple(opts.items()),
                               get("SuspendTime", None),
                               all_nodes=self.part_all,
                               dynamic_nodes=tuple(dict.fromkeys(self.part_dynamic)))
        return part, head, src

    def check_partitions(
        self, parts: list[tuple[PartitionConfig, Pair, _Source]],
    ) -> list[PartitionConfig]:
        """One definition per partition name; only the last Default=YES stays the default."""
        out: list[PartitionConfig] = []
        where: dict[str, tuple[_Source, int]] = {}
        default_at: int | None = None
        for part, head, src in parts:
            if part.name in where:
                s, line = where[part.name]
                self.error(src, head.vline, head.vcol, f"partition {part.name!r} already defined "
                           f"at {s.display}:{line}")
                continue
            where[part.name] = (src, head.line)
            if part.default:
                if default_at is not None:
                    prev = out[default_at]
                    self.warn(src, head.vline, head.vcol, f"several partitions have Default=YES; "
                              f"{part.name!r} replaces {prev.name!r} as the default")
                    out[default_at] = attrs.evolve(prev, default=False)
                default_at = len(out)
            out.append(part)
        return out

    def down_line(self, src: _Source, pairs: list[Pair], order: dict[str, int]) -> None:
        head = pairs[0]
        vals, _ = self.typed_pairs(src, pairs, keys.DOWNNODES_KEYS,
                                   {"State": lambda s: as_enum(s, DOWN_STATES), "Reason": str},
                                   " on a DownNodes line")
        names = self.resolve_nodes(src, head, order, {})
        if not names:
            return
        state = vals["State"][0] if "State" in vals else "DOWN"
        reason = vals["Reason"][0] if "Reason" in vals else None
        for n in names:
            i = order[n]
            self.nodes[i] = attrs.evolve(self.nodes[i], state=state, reason=reason)

    # -- global settings --------------------------------------------------------------------

    def global_pair(self, src: _Source, p: Pair) -> None:
        spec = keys.GLOBAL_KEYS.get(p.key.lower())
        if spec is None:
            self.unknown_key(src, p, keys.GLOBAL_KEYS, "")
            return
        if spec.name in ("SlurmctldHost", "ControlMachine", "BackupController"):
            self.ctl_hosts.append((p, src))
        elif spec.name in self.globals:
            _, prev, psrc = self.globals[spec.name]
            self.warn(src, p.line, p.col, f"{spec.name} specified more than once, latest value "
                      f"used (previous at {psrc.display}:{prev.line})")
            del self.globals[spec.name]
        if not spec.acted:
            self.ignored.setdefault(spec.name)
        self.globals[spec.name] = (spec, p, src)
        verdict = slurm_verdict(spec.name, p.value)
        if verdict is not None:
            said, fatal = verdict
            if fatal:
                self.slurm_refuses(src, p.line, p.col, said)
            else:
                self.warn(src, p.line, p.col, f"slurmctld 22.05 logs: {said}")

    def typed_global(self, name: str, default: Any) -> Any:
        got = self.globals.get(name)
        if got is None:
            return default
        _, p, src = got
        fn = _GLOBAL_CONVERT.get(name)
        value: Any = p.value
        if fn is not None:
            try:
                value = fn(p.value)
            except ValueError as exc:
                self.value_error(src, p, exc)
                return default
        if name in _RESOLVED_PATHS:
            value = value.strip()
            if not value:
                return None
            if not os.path.isabs(value):
                value = os.path.normpath(os.path.join(self.base_dir, value))
        return value

    def controller_hosts(self) -> tuple[ControllerHost, ...]:
        hosts: list[ControllerHost] = []
        new_style = [(p, s) for p, s in self.ctl_hosts if p.key.lower() == "slurmctldhost"]
        if new_style:
            for p, s in new_style:
                m = _CTL_HOST_RE.match(p.value.strip())
                if not m:
                    self.error(s, p.vline, p.vcol, f"{p.key}: expected HOST or HOST(ADDRESS), got "
                               f"{p.value!r}")
                    continue
                hosts.append(ControllerHost(m.group(1), m.group(2) or m.group(1)))
            return tuple(hosts)
        old = {p.key.lower(): p.value.strip() for p, _ in self.ctl_hosts}
        for host_key, addr_key in (("controlmachine", "ControlAddr"),
                                   ("backupcontroller", "BackupAddr")):
            if host_key in old:
                addr_val = self.globals.get(addr_key)
                host = old[host_key]
                hosts.append(ControllerHost(host, addr_val[1].value.strip() if addr_val else host))
        return tuple(hosts)

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
                      f"SuspendExcNodes names undefined node(s) {_few(missing)}")
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

    def dynamic_allowed(self) -> bool:
        """MaxNodeCount set: partitions may name nodes that will join with `rnoded --dynamic`."""
        got = self.globals.get("MaxNodeCount")
        return got is not None and got[1].value.strip().isdigit() and int(got[1].value) > 0

    def state_store(self) -> tuple[str, tuple[str, ...], str, int]:
        """StateStore, EtcdEndpoints, EtcdPrefix, EtcdLeaseTTL (issue 32): etcd needs endpoints."""
        g = self.typed_global
        store = g("StateStore", "file")
        endpoints = g("EtcdEndpoints", None) or ()
        prefix = g("EtcdPrefix", None) or f"/ranch/{g('ClusterName', 'cluster') or 'cluster'}"
        if store == "etcd" and not endpoints:
            _, p, src = self.globals["StateStore"]
            self.error(src, p.vline, p.vcol, "StateStore=etcd needs EtcdEndpoints=HOST:PORT,...")
        return store, tuple(endpoints), prefix.rstrip("/"), g("EtcdLeaseTTL", 5)

    def approval_auto(self) -> tuple[str, ...]:
        got = self.globals.get("NodeApprovalAuto")
        if got is None:
            return ()
        _, p, src = got
        return tuple(self.expand_at(src, p, p.value.strip(), 0) or ())

    def settings_to_config(self, partitions: list[PartitionConfig]) -> ClusterConfig:
        g = self.typed_global
        control = ControlSettings(self.controller_hosts(), g("SlurmctldPort", 6817),
                                  g("StateSaveLocation", None), g("SlurmdSpoolDir", None),
                                  g("SrunPortRange", None), g("SlurmctldLogFile", None),
                                  g("SlurmdLogFile", None), *self.state_store())
        timeouts = Timeouts(g("SlurmdTimeout", 300), g("MessageTimeout", 10),
                            g("HeartbeatInterval", 10), g("ReturnToService", 0))
        health = HealthSettings(g("HealthCheckProgram", None), g("HealthCheckInterval", 0),
                                g("HealthCheckTimeout", 60),
                                g("HealthCheckNodeState", ("ANY",)) or ("ANY",))
        exc_parts = g("SuspendExcParts", ())
        part_names = {p.name for p in partitions}
        unknown_parts = [x for x in exc_parts if x not in part_names]
        if unknown_parts:
            _, p, src = self.globals["SuspendExcParts"]
            self.warn(src, p.vline, p.vcol, f"SuspendExcParts names unknown partition(s) "
                      f"{', '.join(unknown_parts)}")
        power = PowerSettings(
            g("SuspendProgram", None), g("ResumeProgram", None), g("ResumeFailProgram", None),
            g("SuspendTime", None), g("SuspendTimeout", 30), g("ResumeTimeout", 60),
            g("SuspendRate", 60), g("ResumeRate", 300), self.exc_nodes(), exc_parts,
            g("SuspendExcStates", ()), self.power_save_interval())
        auth = AuthSettings(g("AuthKeyFile", None), g("NodeApproval", "auto"))
        http = HttpSettings(g("HttpListen", None), g("HttpTokenFile", None),
                            g("HttpAuth", "loopback"))
        membership = MembershipSettings(
            self.approval_auto(), g("MaxNodeCount", 0), g("EventLogMaxEvents", 10000),
            g("EventLogMaxAge", 30 * 86400))
        jobs = JobSettings(g("KillWait", 30), g("MinJobAge", 300), g("MaxJobCount", 10000),
                           g("MaxArraySize", 1001), g("PurgeJobAfter", 365 * 86400),
                           g("InactiveLimit", 0), g("EnforcePartLimits", "NO"))
        guards = GuardSettings(g("DownGuardPercent", 50), g("DownGuardWindow", 0),
                               g("DownGuardMinNodes", 4), g("DrainGuardPercent", 25),
                               g("DrainGuardWindow", 600), g("DrainGuardMinNodes", 4))
        slurmd_params = {w.strip().lower() for w in (g("SlurmdParameters", None) or "").split(",")}
        reboot = RebootSettings(g("RebootProgram", None), "shutdown_on_reboot" in slurmd_params,
                                g("RebootUnhealthyMax", 2))
        access = AccessSettings(
            g("AuthType", None) or "", self.auth_info(), g("SlurmUser", "root"),
            g("AdminUsers", ()), g("PrivateData", ()), g("DisableRootJobs", False))
        self.ignored.pop("DisableRootJobs", None)  # a partition's is acted on too
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
            jobs=jobs, guards=guards, access=access, reboot=reboot)

    def auth_info(self) -> tuple[tuple[str, str], ...]:
        """AuthInfo=socket=PATH,ttl=N: its options (a relative socket path is the config's)."""
        got = self.globals.get("AuthInfo")
        if got is None:
            return ()
        out = []
        for part in got[1].value.split(","):
            key, _, value = part.strip().partition("=")
            key, value = key.strip().lower(), value.strip()
            if key == "socket" and value and not os.path.isabs(value):
                value = os.path.normpath(os.path.join(self.base_dir, value))
            if key:
                out.append((key, value))
        return tuple(out)


def _build(path: str, abspath: str, text: str, base_dir: str, strict: bool) -> ClusterConfig:
    b = _Builder(path, base_dir, strict)
    b.read(_Source(path, abspath, text), (abspath,))
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
