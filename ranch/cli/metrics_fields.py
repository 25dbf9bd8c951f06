"""`rinfo -N --metrics`: live columns from the nodes' heartbeats (CPU, memory, GPUs, heat, age)."""

from __future__ import annotations

from ranch.cli.sinfo_fields import FIELDS, FieldDef, Group
from ranch.cli.sinfo_format import Field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ranch.cli.sinfo_fields import Fold

MISSING = "-"


def _metrics(g: Group) -> dict | None:
    return g.nodes[0].get("metrics") if g.nodes else None


def _pct(used: float, total: float) -> str:
    return f"{100.0 * used / total:.1f}" if total else MISSING


def _cpu(g: Group, fold: Fold) -> str:
    m = _metrics(g)
    return MISSING if not m or m.get("cpu_pct") is None else f"{m['cpu_pct']:.1f}"


def _mem(g: Group, fold: Fold) -> str:
    m = _metrics(g)
    if not m:
        return MISSING
    return _pct(m.get("mem_used_mib") or 0, m.get("mem_total_mib") or 0)


def _gpu_util(g: Group, fold: Fold) -> str:
    m = _metrics(g)
    gpus = (m or {}).get("gpus") or []
    if not gpus:
        return MISSING
    return f"{sum(x.get('util_pct') or 0 for x in gpus) / len(gpus):.1f}"


def _gpu_mem(g: Group, fold: Fold) -> str:
    m = _metrics(g)
    gpus = (m or {}).get("gpus") or []
    if not gpus:
        return MISSING
    used = sum(x.get("mem_used_mib") or 0 for x in gpus)
    return _pct(used, sum(x.get("mem_total_mib") or 0 for x in gpus))


def _temp(g: Group, fold: Fold) -> str:
    m = _metrics(g)
    if not m:
        return MISSING
    temps = [m["max_temp_c"]] if m.get("max_temp_c") is not None else []
    temps += [x["temp_c"] for x in m.get("gpus") or () if x.get("temp_c") is not None]
    return f"{max(temps):.0f}C" if temps else MISSING


def _age(g: Group, fold: Fold) -> str:
    m = _metrics(g)
    if not m or m.get("heartbeat_age_s") is None:
        return MISSING
    return f"{m['heartbeat_age_s']:.0f}s"


def _health(g: Group, fold: Fold) -> str:
    h = g.nodes[0].get("health") if g.nodes else None
    if not h:
        return MISSING
    notes = list(h.get("warnings") or ())
    if h.get("verdict") not in (None, "ok"):
        notes.insert(0, f"{h['verdict'].upper()}: {h.get('message') or ''}".rstrip(": "))
    return "; ".join(notes) or "ok"


_METRICS = ("metrics",)  # present in records only with GetSnapshot(metrics=True)

METRIC_FIELDS: dict[str, FieldDef] = {
    "@cpu": FieldDef("CPU%", _cpu, reads=_METRICS),
    "@mem": FieldDef("MEM%", _mem, reads=_METRICS),
    "@gpu": FieldDef("GPU_UTIL", _gpu_util, reads=_METRICS),
    "@gpumem": FieldDef("GPU_MEM", _gpu_mem, reads=_METRICS),
    "@temp": FieldDef("MAX_TEMP", _temp, reads=_METRICS),
    "@age": FieldDef("HB_AGE", _age, reads=_METRICS),
    "@health": FieldDef("HEALTH", _health, reads=("health",)),
}

ALL_FIELDS: dict[str, FieldDef] = {**FIELDS, **METRIC_FIELDS}

METRIC_COLUMNS = [
    Field("@cpu", 6, True, " "),
    Field("@mem", 6, True, " "),
    Field("@gpu", 8, True, " "),
    Field("@gpumem", 7, True, " "),
    Field("@temp", 8, True, " "),
    Field("@age", 6, True, " "),
    Field("@health", 0, False, ""),
]
