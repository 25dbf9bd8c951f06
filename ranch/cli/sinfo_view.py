"""rinfo's table: pick nodes and partitions, group them like sinfo, lay out rows (linear time)."""

from __future__ import annotations

from ranch.cli import node_records as nr
from ranch.cli.sinfo_fields import FIELDS, FieldDef, Group
from ranch.cli.sinfo_format import Field, Format, render_table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Sequence

    from ranch.cli.sinfo_fields import Fold

DEFAULT_FORMAT = "%#P %.5a %.10l %.6D %.6t %N"
# sinfo 22.05's -l has no RESERVATION column (checked against real sinfo 22.05.8).
LONG_FORMAT = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
SUMMARY_FORMAT = "%#P %.5a %.10l %.16F %N"
NODE_FORMAT = "%#N %.6D %#P %6t"
NODE_LONG_FORMAT = "%#N %.6D %#P %.11T %.4c %.8z %.6m %.8d %.6w %.8f %20E"
REASON_FORMAT = "%20E %9u %19H %N"
REASON_LONG_FORMAT = "%20E %12U %19H %6t %N"


class Selection:
    """Which nodes and partitions a view shows (rinfo's filter options)."""

    __slots__ = ("all_partitions", "dead", "future", "node_names", "partitions", "responding",
                 "state_match")

    def __init__(
        self,
        partitions: tuple[str, ...] = (),  # -p; empty = every visible partition
        state_match: Callable[[dict], bool] | None = None,  # -t (or -R's default)
        node_names: frozenset[str] | None = None,  # -n
        responding: bool = False,  # -r
        dead: bool = False,  # -d
        future: bool = False,  # -F
        all_partitions: bool = False,  # -a
    ) -> None:
        self.partitions = partitions
        self.state_match = state_match
        self.node_names = node_names
        self.responding = responding
        self.dead = dead
        self.future = future
        self.all_partitions = all_partitions

    @property
    def filters_nodes(self) -> bool:
        return bool(self.state_match or self.node_names is not None or self.responding or self.dead)


def pick_format(*, node: bool, long: bool, summary: bool, reasons: bool, fmt: str | None) -> str:
    if fmt is not None:  # `-o ''` too: sinfo prints an empty line a row
        return fmt
    if reasons:
        return REASON_LONG_FORMAT if long else REASON_FORMAT
    if summary:
        return SUMMARY_FORMAT
    if node:
        return NODE_LONG_FORMAT if long else NODE_FORMAT
    return LONG_FORMAT if long else DEFAULT_FORMAT


# The reasons the controller's guards give nodes they keep in service (statemachine/table.py
# HELD and PAUSED): -R lists those nodes too.
GUARD_REASONS = ("Not responding, held by DownGuard", "[drain paused by DrainGuard]")


def down_drain_fail(node: dict) -> bool:
    """-R's default filter: down, drained/draining and failed/failing nodes, and the nodes a
    guard holds back (held instead of DOWN, a drain paused)."""
    st = node["state"]
    flags = st["flags"]
    if st["base"] == "DOWN" or "DRAIN" in flags or "FAIL" in flags:
        return True
    reason = st.get("reason")
    return bool(reason) and str(reason.get("text", "")).endswith(GUARD_REASONS)


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
        for kf in (d.key, d.exact_key if exact else None):
            if kf is not None and kf not in keyfuncs:
                keyfuncs.append(kf)
    per_part = any(d.partition for d in defs)
    # sinfo's default sort `#P,-t`: partitions in config order, states highest value first.
    sort_by_state = per_part and any(d.key is FIELDS["t"].key for d in defs)

    if node_mode:
        # sinfo -N prints a row per node and partition even when no partition field is shown.
        return _node_rows(nodes, parts)

    found, loose = _bucketed(nodes, parts, _combined(keyfuncs), per_part)
    buckets: list[tuple[dict | None, dict]] = (
        list(zip(parts, found, strict=True)) if per_part else [(None, found[0])]
    )
    if loose:
        buckets.append((None, loose))
    groups: list[Group] = []
    for part, bucket in buckets:
        if not bucket:
            if per_part and show_empty and part is not None and not part.get("nodes"):
                groups.append(Group(part, []))
            continue
        these = [Group(part, members) for members in bucket.values()]
        if sort_by_state:
            these.sort(key=lambda g: -nr.state_value(g.nodes[0]))
        groups.extend(these)
    return groups


def _bucketed(nodes: list[dict], parts: list[dict], keyf: Callable[[dict], Hashable],
              per_part: bool) -> tuple[list[dict], dict]:
    """({key: its nodes} per partition (one for all without `per_part`), those of the nodes in
    no partition). Each node is grouped once (its key computed once), into every shown
    partition it belongs to; a dict keeps first-seen order, which is the row order within a
    partition."""
    found: list[dict] = [{} for _ in parts] if per_part else [{}]
    loose: dict = {}
    index = {p["name"]: i for i, p in enumerate(parts)}
    targets: Sequence[dict]
    for n in nodes:
        k = keyf(n)
        if not per_part:
            targets = found
        elif not n["partitions"]:
            targets = (loose,)
        else:
            targets = [found[i] for i in map(index.get, n["partitions"]) if i is not None]
        for bucket in targets:
            members = bucket.get(k)
            if members is None:
                bucket[k] = [n]
            else:
                members.append(n)
    return found, loose


def _combined(keyfuncs: list[Callable[[dict], Hashable]]) -> Callable[[dict], Hashable]:
    if not keyfuncs:
        return lambda n: None
    if len(keyfuncs) == 1:
        return keyfuncs[0]
    return lambda n: tuple([f(n) for f in keyfuncs])


def _node_rows(nodes: list[dict], parts: list[dict]) -> list[Group]:
    """-N: a row per node and shown partition of it (one row when it has none), in natural name
    order, partitions in config order, partitionless rows first."""
    groups: list[Group] = []
    sort_keys: list[tuple] = []
    natural = nr.natural_key
    order = {p["name"]: i for i, p in enumerate(parts)}
    for n in nodes:
        key = natural(n["name"])
        in_parts = n["partitions"]
        if not in_parts:
            groups.append(Group(None, [n]))
            sort_keys.append((key, -1))
            continue
        for pn in in_parts:
            i = order.get(pn)
            if i is not None:
                groups.append(Group(parts[i], [n]))
                sort_keys.append((key, i))
    ranks = sorted(range(len(groups)), key=sort_keys.__getitem__)
    return [groups[i] for i in ranks]


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
    # sinfo prints the NODELIST, HOSTNAMES and NODE_ADDR headers of a right-justified column
    # whole (print.c: cut_output false), their values cut
    whole = frozenset(i for i, f in enumerate(fmt.fields)
                      if f.letter in "Nno" and f.right and f.width)
    for i in whole:
        for row in rows:
            row[i] = row[i][:fmt.fields[i].width]
    return render_table(fmt, [d.header for d in defs], rows, header=header, whole=whole)


def with_fields(fmt: Format, extra: list[Field]) -> Format:
    """`fmt` with `extra` fields appended, a space apart."""
    last = fmt.fields[-1]
    last = Field(last.letter, last.width, last.right, last.suffix or " ")
    return Format(fmt.prefix, (*fmt.fields[:-1], last, *extra))


# Keys every table view reads: name (sorting, -n), partitions (rows), state (FUTURE hiding,
# -t/-r/-d/-R filters, the state sort).
BASE_READS = ("name", "partitions", "state")


def reads_of(fmt: Format, fields: dict[str, FieldDef] = FIELDS) -> tuple[str, ...]:
    """The node-record keys a table view of `fmt` reads, for GetSnapshot.fields."""
    return _unique((*BASE_READS, *(k for f in fmt.fields for k in fields[f.letter].reads)))


def _unique(keys: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(keys))


def parse(text: str, fields: dict[str, FieldDef] = FIELDS) -> Format:
    """`text` as sinfo reads it; its warnings (letters it does not know) go to stderr, and
    those runs are printed as written, as sinfo does."""
    import sys

    from ranch.cli.sinfo_format import ALL, parse_sinfo_format

    fmt, warnings = parse_sinfo_format(ALL if text.lower() == "%all" else text, frozenset(fields))
    for line in warnings:
        print(line, file=sys.stderr)
    return fmt


def sort_groups(groups: list[Group], spec: str, fold: Fold,
                fields: dict[str, FieldDef] = FIELDS) -> list[Group]:
    """sinfo -S: stable sorts from the last letter to the first (src/sinfo/sort.c), `-` before
    a letter descending, `#P` the partitions' configured order; a letter sinfo does not sort
    by is passed over, as sinfo does."""
    out = list(groups)
    config_order = {id(g.part): k for k, g in reversed(list(enumerate(groups)))}
    for i in range(len(spec) - 1, -1, -1):
        letter = spec[i]
        if letter in ",#+-" or letter not in fields:
            continue
        before = spec[i - 1] if i else ""

        def key(g: Group, letter: str = letter, before: str = before) -> tuple:
            if letter in "PR" and before == "#":
                return (config_order.get(id(g.part), 0),)
            if letter in "tT":
                return (-nr.state_value(g.nodes[0]) if g.nodes else 0,)
            text = fields[letter].render(g, fold)
            return (0, int(text), "") if text.isdigit() else (1, 0, text)

        out.sort(key=key, reverse=before == "-")
    return out
