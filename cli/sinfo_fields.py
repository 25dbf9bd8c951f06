"""The `-o` field letters of sinfo: header, how a field groups nodes, and how it prints a group."""

from __future__ import annotations

from collections.abc import Callable, Hashable

import attrs

from cli import node_records as nr


class Group:
    """Nodes printed on one line: all share one partition (or none) and every grouping key."""

    __slots__ = ("nodes", "part")

    def __init__(self, part: dict | None, nodes: list[dict]) -> None:
        self.part = part
        self.nodes = nodes


Fold = Callable[[list[str]], str]


@attrs.frozen
class FieldDef:
    header: str
    render: Callable[[Group, Fold], str]
    key: Callable[[dict], Hashable] | None = None  # groups on this value always
    exact_key: Callable[[dict], Hashable] | None = None  # ... and with -e only
    partition: bool = False  # the value is the partition's, so rows are per partition


def _first(g: Group) -> dict | None:
    return g.nodes[0] if g.nodes else None


def _fold_of(attr: str) -> Callable[[Group, Fold], str]:
    def render(g: Group, fold: Fold) -> str:
        if len(g.nodes) == 1:
            return g.nodes[0][attr] or ""
        return fold([n[attr] for n in g.nodes if n[attr]])

    return render


def _min_plus_of(get: Callable[[dict], int]) -> Callable[[Group, Fold], str]:
    def render(g: Group, fold: Fold) -> str:
        return nr.min_plus([get(n) for n in g.nodes])

    return render


def _part_text(g: Group, fold: Fold) -> str:
    if g.part is None:
        return "n/a"
    return g.part["name"] + ("*" if g.part.get("default") else "")


def _part_name(g: Group, fold: Fold) -> str:
    return "n/a" if g.part is None else g.part["name"]


_AVAIL = {"UP": "up", "DOWN": "down", "DRAIN": "drain", "INACTIVE": "inact"}


def _avail(g: Group, fold: Fold) -> str:
    if g.part is None:
        return "n/a"
    state = g.part.get("state", "UP")
    return _AVAIL.get(state, state.lower())


def _limit(attr: str, missing: str) -> Callable[[Group, Fold], str]:
    def render(g: Group, fold: Fold) -> str:
        if g.part is None:
            return "n/a"
        minutes = g.part.get(attr)
        if minutes is None and missing != "infinite":
            return missing
        from cli.light_imports import conf_module

        return conf_module("timefmt").format_limit(minutes)

    return render


def _const_for_part(text: str) -> Callable[[Group, Fold], str]:
    return lambda g, fold: "n/a" if g.part is None else text


def _state(attr: str) -> Callable[[Group, Fold], str]:
    def render(g: Group, fold: Fold) -> str:
        first = _first(g)
        return "n/a" if first is None else first[attr]

    return render


def _aiot_nodes(g: Group, fold: Fold) -> str:
    counts = {"A": 0, "I": 0, "O": 0}
    for n in g.nodes:
        counts[nr.usage_class(n)] += 1
    return f"{counts['A']}/{counts['I']}/{counts['O']}/{len(g.nodes)}"


def _aiot_cpus(g: Group, fold: Fold) -> str:
    alloc = idle = other = total = 0
    for n in g.nodes:
        cpus, used = n["cpus"], n["cpus_alloc"]
        total += cpus
        alloc += used
        if nr.is_unusable(n):
            other += cpus - used
        else:
            idle += cpus - used
    return f"{alloc}/{idle}/{other}/{total}"


def _load(g: Group, fold: Fold) -> str:
    loads = [n["cpu_load"] for n in g.nodes if n.get("cpu_load") is not None]
    if not loads:
        return "N/A"
    lo, hi = min(loads), max(loads)
    return f"{lo:.2f}" if lo == hi else f"{lo:.2f}-{hi:.2f}"


def _free_mem(g: Group, fold: Fold) -> str:
    free = [n["free_mem"] for n in g.nodes if n.get("free_mem") is not None]
    if not free:
        return "N/A"
    lo, hi = min(free), max(free)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _sct(g: Group, fold: Fold) -> str:
    s = nr.min_plus([n["sockets"] for n in g.nodes])
    c = nr.min_plus([n["cores_per_socket"] for n in g.nodes])
    t = nr.min_plus([n["threads_per_core"] for n in g.nodes])
    return f"{s}:{c}:{t}"


def _reason_text(n: dict) -> str:
    r = nr.reason_of(n)
    return (r or {}).get("text") or "none"


def _reason_user(n: dict) -> str:
    r = nr.reason_of(n)
    return nr.reason_user(r) if r else "Unknown"


def _reason_user_uid(n: dict) -> str:
    r = nr.reason_of(n)
    if not r:
        return "Unknown"
    user = nr.reason_user(r)
    try:
        import pwd

        return f"{user}({pwd.getpwnam(user).pw_uid})"
    except (KeyError, ImportError):
        return user


def _reason_time(n: dict) -> str:
    r = nr.reason_of(n)
    return nr.iso_time(r.get("time")) if r else "Unknown"


def _per_node(get: Callable[[dict], str]) -> Callable[[Group, Fold], str]:
    def render(g: Group, fold: Fold) -> str:
        first = _first(g)
        return "" if first is None else get(first)

    return render


def _state_key(n: dict) -> Hashable:
    return (n["compact"], n["complete"])


def _reason_key(n: dict) -> Hashable:
    r = nr.reason_of(n)
    return None if not r else r.get("text")


def _reason_user_key(n: dict) -> Hashable:
    r = nr.reason_of(n)
    return None if not r else r.get("user")


def _reason_time_key(n: dict) -> Hashable:
    r = nr.reason_of(n)
    return None if not r else r.get("time")


def _features_key(n: dict) -> Hashable:
    return tuple(n.get("features") or ())


def _sct_key(n: dict) -> Hashable:
    return (n["sockets"], n["cores_per_socket"], n["threads_per_core"])


FIELDS: dict[str, FieldDef] = {
    "P": FieldDef("PARTITION", _part_text, partition=True),
    "R": FieldDef("PARTITION", _part_name, partition=True),
    "a": FieldDef("AVAIL", _avail, partition=True),
    "l": FieldDef("TIMELIMIT", _limit("max_time", "infinite"), partition=True),
    "L": FieldDef("DEFAULTTIME", _limit("default_time", "n/a"), partition=True),
    "s": FieldDef("JOB_SIZE", _const_for_part("1-infinite"), partition=True),
    "r": FieldDef("ROOT", _const_for_part("no"), partition=True),
    "h": FieldDef("OVERSUBSCRIBE", _const_for_part("NO"), partition=True),
    "g": FieldDef("GROUPS", _const_for_part("all"), partition=True),
    "i": FieldDef("RESERVATION", lambda g, fold: ""),
    "D": FieldDef("NODES", lambda g, fold: str(len(g.nodes))),
    "t": FieldDef("STATE", _state("compact"), key=_state_key),
    "T": FieldDef("STATE", _state("long"), key=_state_key),
    "N": FieldDef("NODELIST", _fold_of("name")),
    "n": FieldDef("HOSTNAMES", _fold_of("hostname")),
    "o": FieldDef("NODE_ADDR", _fold_of("addr")),
    "c": FieldDef("CPUS", _min_plus_of(lambda n: n["cpus"]), exact_key=lambda n: n["cpus"]),
    "C": FieldDef("CPUS(A/I/O/T)", _aiot_cpus),
    "F": FieldDef("NODES(A/I/O/T)", _aiot_nodes),
    "m": FieldDef(
        "MEMORY", _min_plus_of(lambda n: n["real_memory"]), exact_key=lambda n: n["real_memory"]
    ),
    "e": FieldDef("FREE_MEM", _free_mem, exact_key=lambda n: n.get("free_mem")),
    "O": FieldDef("CPU_LOAD", _load, exact_key=lambda n: n.get("cpu_load")),
    "d": FieldDef(
        "TMP_DISK", _min_plus_of(lambda n: n["tmp_disk"]), exact_key=lambda n: n["tmp_disk"]
    ),
    "f": FieldDef("AVAIL_FEATURES", _per_node(nr.features_text), key=_features_key),
    "b": FieldDef("ACTIVE_FEATURES", _per_node(nr.features_text), key=_features_key),
    "G": FieldDef("GRES", _per_node(nr.gres_text), key=lambda n: n.get("gres")),
    "w": FieldDef(
        "WEIGHT", _min_plus_of(lambda n: n["weight"]), exact_key=lambda n: n["weight"]
    ),
    "z": FieldDef("S:C:T", _sct, exact_key=_sct_key),
    "X": FieldDef(
        "SOCKETS", _min_plus_of(lambda n: n["sockets"]), exact_key=lambda n: n["sockets"]
    ),
    "Y": FieldDef(
        "CORES",
        _min_plus_of(lambda n: n["cores_per_socket"]),
        exact_key=lambda n: n["cores_per_socket"],
    ),
    "Z": FieldDef(
        "THREADS",
        _min_plus_of(lambda n: n["threads_per_core"]),
        exact_key=lambda n: n["threads_per_core"],
    ),
    "E": FieldDef("REASON", _per_node(_reason_text), key=_reason_key),
    "u": FieldDef("USER", _per_node(_reason_user), key=_reason_user_key),
    "U": FieldDef("USER", _per_node(_reason_user_uid), key=_reason_user_key),
    "H": FieldDef("TIMESTAMP", _per_node(_reason_time), key=_reason_time_key),
    "v": FieldDef("VERSION", _per_node(lambda n: n.get("version") or "N/A"),
                  key=lambda n: n.get("version")),
}
