"""rinfo's table: pick nodes and partitions, group them like sinfo, lay out rows (linear time)."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from cli import node_records as nr
from cli.sinfo_fields import FIELDS, FieldDef, Fold, Group
from cli.sinfo_format import Field, Format, parse_format, render_table

DEFAULT_FORMAT = "%#P %.5a %.10l %.6D %.6t %N"
LONG_FORMAT = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %.11i %N"
SUMMARY_FORMAT = "%#P %.5a %.10l %.16F %N"
NODE_FORMAT = "%#N %.6D %#P %6t"
NODE_LONG_FORMAT = "%#N %.6D %#P %.11T %.4c %.8z %.6m %.8d %.6w %.8f %20E"
REASON_FORMAT = "%20E %9u %19H %N"
REASON_LONG_FORMAT = "%20E %12U %19H %6t %N"


@attrs.frozen
class Selection:
    """Which nodes and partitions a view shows (rinfo's filter options)."""

    partitions: tuple[str, ...] = ()  # -p; empty = every visible partition
    state_match: Callable[[dict], bool] | None = None  # -t (or -R's default)
    node_names: frozenset[str] | None = None  # -n
    responding: bool = False  # -r
    dead: bool = False  # -d
    future: bool = False  # -F
    all_partitions: bool = False  # -a

    @property
    def filters_nodes(self) -> bool:
        return bool(self.state_match or self.node_names is not None or self.responding or self.dead)


def pick_format(*, node: bool, long: bool, summary: bool, reasons: bool, fmt: str | None) -> str:
    if fmt:
        return fmt
    if reasons:
        return REASON_LONG_FORMAT if long else REASON_FORMAT
    if summary:
        return SUMMARY_FORMAT
    if node:
        return NODE_LONG_FORMAT if long else NODE_FORMAT
    return LONG_FORMAT if long else DEFAULT_FORMAT


def down_drain_fail(node: dict) -> bool:
    """-R's default filter: down, drained/draining and failed/failing nodes."""
    st = node["state"]
    flags = st["flags"]
    return st["base"] == "DOWN" or "DRAIN" in flags or "FAIL" in flags


def select(nodes: list[dict] | tuple, parts: list[dict] | tuple, sel: Selection):
    """(partitions shown, nodes shown with their partition lists cut to the shown partitions)."""
    if sel.partitions:
        wanted = set(sel.partitions)
        shown_parts = [p for p in parts if p["name"] in wanted]
    elif sel.all_partitions:
        shown_parts = list(parts)
    else:
        shown_parts = [p for p in parts if not p.get("hidden")]
    shown_names = {p["name"] for p in shown_parts}
    every_part = len(shown_parts) == len(parts)
    picked = []
    for n in nodes:
        if not sel.future and n["state"]["base"] == "FUTURE":
            continue
        if sel.node_names is not None and n["name"] not in sel.node_names:
            continue
        if sel.responding and nr.not_responding(n):
            continue
        if sel.dead and not nr.not_responding(n):
            continue
        if sel.state_match is not None and not sel.state_match(n):
            continue
        if not every_part:
            in_parts = n["partitions"]
            if in_parts and not any(p in shown_names for p in in_parts):
                continue
            if not in_parts and sel.partitions:
                continue
        picked.append(n)
    return shown_parts, picked


def build_groups(
    nodes: list[dict],
    parts: list[dict],
    fmt: Format,
    *,
    node_mode: bool = False,
    exact: bool = False,
    show_empty: bool = True,
    fields: dict[str, FieldDef] = FIELDS,
) -> list[Group]:
    """Rows of the view: one per partition and distinct value of every grouping field printed."""
    defs = [fields[f.letter] for f in fmt.fields]
    keyfuncs = []
    for d in defs:
        for k in (d.key, d.exact_key if exact else None):
            if k is not None and k not in keyfuncs:
                keyfuncs.append(k)
    per_part = any(d.partition for d in defs)
    # sinfo's default sort `#P,-t`: partitions in config order, states highest value first.
    sort_by_state = per_part and any(d.key is FIELDS["t"].key for d in defs)

    buckets: list[tuple[dict | None, list[dict]]]
    if per_part:
        index = {p["name"]: i for i, p in enumerate(parts)}
        lists: list[list[dict]] = [[] for _ in parts]
        loose = []
        for n in nodes:
            in_parts = n["partitions"]
            if not in_parts:
                loose.append(n)
                continue
            for pn in in_parts:
                i = index.get(pn)
                if i is not None:
                    lists[i].append(n)
        buckets = list(zip(parts, lists, strict=True))
        if loose:
            buckets.append((None, loose))
    else:
        buckets = [(None, list(nodes))]

    groups: list[Group] = []
    if node_mode:
        order = {p["name"]: i for i, p in enumerate(parts)}
        for part, members in buckets:
            groups.extend(Group(part, [n]) for n in members)
        groups.sort(
            key=lambda g: (
                nr.natural_key(g.nodes[0]["name"]),
                -1 if g.part is None else order[g.part["name"]],
            )
        )
        return groups

    for part, members in buckets:
        if not members:
            if per_part and show_empty and part is not None and not part.get("nodes"):
                groups.append(Group(part, []))
            continue
        found: dict[tuple, Group] = {}
        for n in members:
            k = tuple(f(n) for f in keyfuncs)
            g = found.get(k)
            if g is None:
                found[k] = Group(part, [n])
            else:
                g.nodes.append(n)
        these = list(found.values())
        if sort_by_state:
            these.sort(key=lambda g: -nr.state_value(g.nodes[0]))
        groups.extend(these)
    return groups


def render(
    fmt: Format,
    groups: list[Group],
    fold: Fold,
    *,
    header: bool = True,
    fields: dict[str, FieldDef] = FIELDS,
) -> list[str]:
    defs = [fields[f.letter] for f in fmt.fields]
    rows = [[d.render(g, fold) for d in defs] for g in groups]
    return render_table(fmt, [d.header for d in defs], rows, header=header)


def with_fields(fmt: Format, extra: list[Field]) -> Format:
    """`fmt` with `extra` fields appended, a space apart."""
    last = fmt.fields[-1]
    head = (*fmt.fields[:-1], attrs.evolve(last, suffix=last.suffix or " "))
    return Format(fmt.prefix, (*head, *extra))


def parse(text: str, fields: dict[str, FieldDef] = FIELDS) -> Format:
    return parse_format(text, frozenset(fields))
