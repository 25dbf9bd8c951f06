"""The `-o` field letters of sinfo: header, how a field groups nodes, and how it prints a group."""

from __future__ import annotations

from ranch.cli import node_records as nr
from ranch.cli.partition_options import PartOptions
from ranch.conf.timefmt import format_sinfo_limit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Hashable

    Fold = Callable[[list[str]], str]


class Group:
    """Nodes printed on one line: all share one partition (or none) and every grouping key."""

    __slots__ = ("nodes", "part")

    def __init__(self, part: dict | None, nodes: list[dict]) -> None:
        self.part = part
        self.nodes = nodes


class FieldDef:
    """One field letter: header, how it prints a group, what groups by it, which record keys
    it reads (sent as GetSnapshot.fields, so that the controller sends only those)."""

    __slots__ = ("exact_key", "header", "key", "partition", "reads", "render")

    def __init__(
        self,
        header: str,
        render: Callable[[Group, Fold], str],
        key: Callable[[dict], Hashable] | None = None,  # groups on this value always
        exact_key: Callable[[dict], Hashable] | None = None,  # ... and with -e only
        partition: bool = False,  # the value is the partition's, so rows are per partition
        reads: tuple[str, ...] = (),  # node-record keys that render and the keys look at
    ) -> None:
        self.header = header
        self.render = render
        self.key = key
        self.exact_key = exact_key
        self.partition = partition
        self.reads = reads


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
        return format_sinfo_limit(minutes)

    return render


def _part_option(show: Callable[[PartOptions], str]) -> Callable[[Group, Fold], str]:
    """A value from the partition's configured options (JOB_SIZE, ROOT, OVERSUBSCRIBE...)."""
    return lambda g, fold: "n/a" if g.part is None else show(PartOptions(g.part))


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


def _ai_nodes(g: Group, fold: Fold) -> str:
    """sinfo %A: nodes allocated (or mixed) / idle."""
    counts = {"A": 0, "I": 0, "O": 0}
    for n in g.nodes:
        counts[nr.usage_class(n)] += 1
    return f"{counts['A']}/{counts['I']}"


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


_STATE = ("state",)  # base/flags for filters and sorting, the reason for %E %u %U %H
_SCT = ("sockets", "cores_per_socket", "threads_per_core")


def _min_plus_field(header: str, attr: str) -> FieldDef:
    return FieldDef(header, _min_plus_of(lambda n: n[attr]), exact_key=lambda n: n[attr],
                    reads=(attr,))


FIELDS: dict[str, FieldDef] = {
    "P": FieldDef("PARTITION", _part_text, partition=True),
    "R": FieldDef("PARTITION", _part_name, partition=True),
    "a": FieldDef("AVAIL", _avail, partition=True),
    "l": FieldDef("TIMELIMIT", _limit("max_time", "infinite"), partition=True),
    "L": FieldDef("DEFAULTTIME", _limit("default_time", "n/a"), partition=True),
    "s": FieldDef("JOB_SIZE", _part_option(PartOptions.job_size), partition=True),
    "p": FieldDef("PRIO_TIER", _part_option(lambda o: o.priority("PriorityTier")),
                  partition=True),
    "r": FieldDef("ROOT", _part_option(lambda o: o.yes_no("RootOnly").lower()), partition=True),
    "h": FieldDef("OVERSUBSCRIBE", _part_option(PartOptions.oversubscribe), partition=True),
    "g": FieldDef("GROUPS", _part_option(PartOptions.groups), partition=True),
    "D": FieldDef("NODES", lambda g, fold: str(len(g.nodes))),
    "t": FieldDef("STATE", _state("compact"), key=_state_key, reads=("compact", "complete")),
    "T": FieldDef("STATE", _state("long"), key=_state_key,
                  reads=("long", "compact", "complete")),
    "N": FieldDef("NODELIST", _fold_of("name"), reads=("name",)),
    "n": FieldDef("HOSTNAMES", _fold_of("hostname"), reads=("hostname",)),
    "o": FieldDef("NODE_ADDR", _fold_of("addr"), reads=("addr",)),
    "c": _min_plus_field("CPUS", "cpus"),
    "C": FieldDef("CPUS(A/I/O/T)", _aiot_cpus, reads=("cpus", "cpus_alloc", *_STATE)),
    "F": FieldDef("NODES(A/I/O/T)", _aiot_nodes, reads=_STATE),
    "m": _min_plus_field("MEMORY", "real_memory"),
    "e": FieldDef("FREE_MEM", _free_mem, exact_key=lambda n: n.get("free_mem"),
                  reads=("free_mem",)),
    "O": FieldDef("CPU_LOAD", _load, exact_key=lambda n: n.get("cpu_load"), reads=("cpu_load",)),
    "d": _min_plus_field("TMP_DISK", "tmp_disk"),
    "f": FieldDef("AVAIL_FEATURES", _per_node(nr.features_text), key=_features_key,
                  reads=("features",)),
    "b": FieldDef("ACTIVE_FEATURES", _per_node(nr.features_text), key=_features_key,
                  reads=("features",)),
    "G": FieldDef("GRES", _per_node(nr.gres_text), key=lambda n: n.get("gres"), reads=("gres",)),
    "w": _min_plus_field("WEIGHT", "weight"),
    "z": FieldDef("S:C:T", _sct, exact_key=_sct_key, reads=_SCT),
    "X": _min_plus_field("SOCKETS", "sockets"),
    "Y": _min_plus_field("CORES", "cores_per_socket"),
    "Z": _min_plus_field("THREADS", "threads_per_core"),
    "E": FieldDef("REASON", _per_node(_reason_text), key=_reason_key, reads=_STATE),
    "u": FieldDef("USER", _per_node(_reason_user), key=_reason_user_key, reads=_STATE),
    "U": FieldDef("USER", _per_node(_reason_user_uid), key=_reason_user_key, reads=_STATE),
    "H": FieldDef("TIMESTAMP", _per_node(_reason_time), key=_reason_time_key, reads=_STATE),
    "v": FieldDef("VERSION", _per_node(lambda n: n.get("version") or "N/A"),
                  key=lambda n: n.get("version"), reads=("version",)),
    "A": FieldDef("NODES(A/I)", _ai_nodes, reads=_STATE),
    "I": FieldDef("PRIO_JOB_FACTOR", _part_option(lambda o: o.priority("PriorityJobFactor")),
                  partition=True),
    # what Ranch's partitions and nodes have no notion of (a per-node CPU cap, preemption,
    # AllocNodes, federation's cluster, node comments and extra data), as sinfo prints a
    # partition or node without one
    "B": FieldDef("MAX_CPUS_PER_NODE", lambda g, fold: "UNLIMITED", partition=True),
    "M": FieldDef("PREEMPT_MODE", lambda g, fold: "OFF", partition=True),
    "S": FieldDef("ALLOCNODES", lambda g, fold: "all", partition=True),
    "V": FieldDef("CLUSTER", lambda g, fold: "N/A"),
    # sinfo -O names without a letter (keys longer than a letter: -o never reads them)
    "comment": FieldDef("COMMENT", lambda g, fold: "(null)"),
    "extra": FieldDef("EXTRA", lambda g, fold: "(null)"),
    "allocmem": FieldDef("ALLOCMEM", _min_plus_of(lambda n: n.get("alloc_mem") or 0),
                         key=lambda n: n.get("alloc_mem"), reads=("alloc_mem",)),
    "gresused": FieldDef("GRES_USED", _per_node(lambda n: n.get("gres_used") or "(null)"),
                         key=lambda n: n.get("gres_used"), reads=("gres_used",)),
    # rnoded listens on no port (it dials the controller): a node's Port= as configured
    "port": FieldDef("PORT", _per_node(lambda n: str(n.get("port") or "N/A")),
                     key=lambda n: n.get("port"), reads=("port",)),
    "statecomplete": FieldDef("STATECOMPLETE", lambda g, fold: "n/a" if not g.nodes
                              else g.nodes[0]["complete"].lower(), key=_state_key,
                              reads=("compact", "complete")),
}
