"""PartitionName, NodeSet and DownNodes lines: the lines that name nodes by list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ranch.conf import keys
from ranch.conf.buildbase import BuilderBase, Source, few, own_suspend_time
from ranch.conf.model import PartitionConfig
from ranch.conf.parser import Pair
from ranch.conf.refused import partition_key_verdict
from ranch.conf.values import (
    DOWN_STATES,
    PARTITION_STATES,
    as_billing_weights,
    as_bool,
    as_enum,
    as_int,
    as_time,
    split_top,
)

_PART_CONVERT: dict[str, Callable[[str], Any]] = {
    "Nodes": str,
    "Default": as_bool,
    "Hidden": as_bool,
    "State": lambda s: as_enum(s, PARTITION_STATES),
    "MaxTime": as_time,
    "DefaultTime": as_time,
    "SuspendTime": lambda s: own_suspend_time(s),
    "TRESBillingWeights": as_billing_weights,
    "PriorityJobFactor": lambda s: as_int(s, 0, 65533),
    "PriorityTier": lambda s: as_int(s, 0, 65533),
    "Priority": lambda s: as_int(s, 0, 65533),
}
PRIORITY_KEYS = ("Priority", "PriorityJobFactor", "PriorityTier")  # acted on, shown as written



class PartitionLines(BuilderBase):
    """PartitionName, NodeSet and DownNodes lines."""

    def nodesets(self, lines: list[tuple[Source, list[Pair]]]) -> dict[str, list[str]]:
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

    def resolve_nodes(self, src: Source, p: Pair, order: dict[str, int],
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
                                   f"{p.key}: node(s) {few(missing)} not defined by any "
                                   "NodeName line")
                    names.extend(got)
            offset += len(part) + 1
        if not ok:
            return None
        if len(names) <= 1:
            return names
        uniq = dict.fromkeys(names)
        return sorted(uniq, key=order.__getitem__)

    def partition_line(self, src: Source, pairs: list[Pair], order: dict[str, int],
                       nodesets: dict[str, list[str]]) -> tuple[PartitionConfig, Pair,
                                                                Source] | None:
        head = pairs[0]
        vals, options = self.typed_pairs(src, pairs, keys.PARTITION_KEYS, _PART_CONVERT,
                                         " on a PartitionName line")
        if "TRESBillingWeights" in vals:  # read for usage, and still shown as written
            options = [*options, ("TRESBillingWeights", vals["TRESBillingWeights"][1].value)]
        options = [*options, *((k, vals[k][1].value) for k in PRIORITY_KEYS if k in vals)]
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
                               dynamic_nodes=tuple(dict.fromkeys(self.part_dynamic)),
                               billing=get("TRESBillingWeights", ()))
        return part, head, src

    def check_partitions(
        self, parts: list[tuple[PartitionConfig, Pair, Source]],
    ) -> list[PartitionConfig]:
        """One definition per partition name; only the last Default=YES stays the default."""
        out: list[PartitionConfig] = []
        where: dict[str, tuple[Source, int]] = {}
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

    def down_line(self, src: Source, pairs: list[Pair], order: dict[str, int]) -> None:
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
