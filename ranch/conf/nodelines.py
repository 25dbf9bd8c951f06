"""NodeName lines: one NodeConfig per expanded name, typed and checked once per line."""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from typing import Any

from ranch.conf import keys
from ranch.conf.buildbase import BuilderBase, Source, Val, few, own_suspend_time
from ranch.conf.model import NodeConfig
from ranch.conf.parser import Pair
from ranch.conf.values import NODE_STATES, as_enum, as_int, as_list, parse_gres

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
    "SuspendTime": lambda s: own_suspend_time(s),
}

# Old or alternative spellings that set the same node value. Procs is not one: Slurm reads
# CPUs whenever it is given (on the line or its DEFAULT) and Procs only without it.
_NODE_ALIASES = {"Feature": "Features"}


class NodeLines(BuilderBase):
    """NodeName lines, DEFAULT ones included."""

    def node_line(self, src: Source, pairs: list[Pair]) -> None:
        head = pairs[0]
        vals, options = self.typed_pairs(src, pairs, keys.NODE_KEYS, _NODE_CONVERT,
                                         " on a NodeName line", _NODE_ALIASES)
        expr = head.value.strip()
        if expr.upper() == "DEFAULT":
            self.node_default_line(vals, options)
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
        self.add_nodes(names, hostnames, addrs, hw, merged, tuple(opts.items()))

    def node_default_line(self, vals: dict[str, Val], options: list[tuple[str, str]]) -> None:
        """NodeName=DEFAULT: values later lines start from (no per-host names there)."""
        for k in ("NodeHostname", "NodeAddr"):
            if k in vals:
                _, p, s = vals.pop(k)
                self.error(s, p.line, p.col, f"{k} cannot be set on NodeName=DEFAULT")
        self.node_defaults.update(vals)
        self.node_default_options.update(options)

    def add_nodes(self, names: list[str], hostnames: list[str], addrs: list[str],
                  hw: tuple[int, int, int, int, int], merged: dict[str, Val],
                  opt_t: tuple[tuple[str, str], ...]) -> None:
        """One NodeConfig per name, from values typed once for the whole line."""

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
        suspend_time = get("SuspendTime", None)
        make = NodeConfig
        self.nodes.extend(
            make(n, h, a, port, cpus, boards, sockets, cores, threads, real_memory, tmp_disk,
                 gres, features, weight, state, reason, opt_t, suspend_time)
            for n, h, a in zip(names, hostnames, addrs, strict=True))

    def per_node(self, src: Source, val: Val | None, names: list[str],
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

    def hardware(self, src: Source, head: Pair, merged: dict[str, Val],
                 own: dict[str, Val]) -> tuple[int, int, int, int, int] | None:
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

    def check_duplicates(self, src: Source, head: Pair, names: list[str]) -> None:
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
        shown = few(dups)
        at = f" (first defined at {first[0].display}:{first[1]})" if first else ""
        self.error(src, head.vline, head.vcol,
                   f"node(s) {shown} already defined; a node may appear on one NodeName line "
                   f"only{at}")
