"""`/metrics`: the Prometheus text of every node, under the names dashboards already read.

Families and where their names come from (looked up in the projects' sources, not guessed):
- Slurm 25.11's own metrics (slurmctld's metrics/openmetrics plugin,
  SchedMD/slurm src/plugins/metrics/openmetrics/openmetrics.c): per node `slurm_node_cpus`,
  `slurm_node_cpus_alloc`, `_effective`, `_idle`, `slurm_node_gpus`, `_alloc`,
  `slurm_node_memory_bytes`, `_alloc_bytes`, `_effective_bytes`, `_free_bytes` with a `node` label;
  cluster-wide `slurm_nodes`, `slurm_nodes_alloc`, `_idle`, `_mixed`, `_down`, `_drain`, ...
- prometheus-slurm-exporter (vpenso/prometheus-slurm-exporter node.go, nodes.go, cpus.go): per
  node `slurm_node_cpu_alloc|idle|other|total`, `slurm_node_mem_alloc|total`,
  `slurm_node_gpu_total` with `node` and `status` (sinfo's long state with its suffix);
  `slurm_nodes_mix|comp|err|idle_power_save|plnd` and `slurm_cpus_alloc|idle|other|total`.
  Where both families use one name (`slurm_nodes_alloc`, `_idle`, `_down`, `_drain`, `_fail`,
  `_maint`, `_resv`) it is written once, with Slurm's meaning.
- dcgm-exporter (NVIDIA/dcgm-exporter default-counters.csv): `DCGM_FI_DEV_GPU_UTIL`,
  `DCGM_FI_DEV_GPU_TEMP`, `DCGM_FI_DEV_FB_USED` (integers, as DCGM reports them) with its labels
  `gpu`, `UUID`, `modelName`, `Hostname` (its `pci_bus_id` and `device` are left out: they
  would add a third to the largest part of the text and no dashboard keys on them).
- Ranch's own: `ranch_node_state{node,state,reason_source}` = 1 and
  `ranch_node_reason_timestamp_seconds{node,reason,user,reason_source}`.

Cost (bench/http_bench.py): prometheus-client's registry builds an object per sample, seconds at
10,000 nodes of 8 GPUs, so the text is written here, as bytes (no 36 MB encode per scrape). What
only a state change alters is kept per node as ready lines and per family as one block; what
every heartbeat alters (free memory, GPU figures) is formatted per chunk of CHUNK nodes with one
%-format per family: the chunk's template (every label prefix, then %d) is built once and kept
while the chunk's nodes and GPU counts stay the same, and the chunk's figures are gathered from
the packed metrics arrays in one C-level join. The work is split in chunks of CHUNK nodes so the
route can let heartbeats through between them.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

import orjson

from ranch.ctld.nodes.node import PACKED_HEAD, PER_GPU  # the packed metrics' layout
from ranch.statemachine import names
from ranch.statemachine.model import Base, Flag
from ranch.statemachine.predicates import is_unusable

CHUNK = 1000
MIB = 1024 * 1024
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# (name, help, labels) of the per-node families that only a state or config change alters.
# "n" = {node=...}, "ns" = {node=...,status=...}, "st" = ranch_node_state, "re" = reason.
_NODE_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("slurm_node_cpus", "Total number of cpus in the node", "n"),
    ("slurm_node_cpus_alloc", "Allocated cpus in the node", "n"),
    ("slurm_node_cpus_effective", "CPUs allocatable to jobs not reserved for system usage", "n"),
    ("slurm_node_cpus_idle", "Idle cpus in the node", "n"),
    ("slurm_node_gpus", "Total number of GPUs in the node", "n"),
    ("slurm_node_gpus_alloc", "Number of GPUs currently allocated by jobs on the node", "n"),
    ("slurm_node_memory_bytes", "Total memory in bytes of the node", "n"),
    ("slurm_node_memory_alloc_bytes", "Bytes allocated to jobs in the node", "n"),
    ("slurm_node_memory_effective_bytes",
     "Memory allocatable to jobs not reserved for system usage", "n"),
    ("slurm_node_cpu_alloc", "Allocated CPUs per node", "ns"),
    ("slurm_node_cpu_idle", "Idle CPUs per node", "ns"),
    ("slurm_node_cpu_other", "Other CPUs per node", "ns"),
    ("slurm_node_cpu_total", "Total CPUs per node", "ns"),
    ("slurm_node_mem_alloc", "Allocated memory per node", "ns"),
    ("slurm_node_mem_total", "Total memory per node", "ns"),
    ("slurm_node_gpu_total", "Total GPUs per node", "ns"),
    ("ranch_node_state", "Node state as sinfo names it (long form with suffix); always 1", "st"),
    ("ranch_node_reason_timestamp_seconds",
     "When the node's reason was set (epoch seconds), with the reason, its user and source",
     "re"),
)
# Per-heartbeat families: (name, help, index into the packed per-GPU record or a derived key).
_FREE_MEM = ("slurm_node_memory_free_bytes", "Free memory in bytes of the node")
_GPU_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "util"),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temp"),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "used"),
)
_GPU_OFFSETS = (1, 4, 2)  # each family's figure in a GPU's packed record (pack_metrics)

# Cluster-wide counts: Slurm's names, then the exporter's that Slurm lacks.
_SLURM_COUNTS = (
    "alloc", "blocked", "completing", "cloud", "down", "drain", "drained", "draining",
    "dyn_future", "dyn_normal", "external", "fail", "future", "idle", "invalid_reg", "maint",
    "mixed", "noresp", "planned", "power_down", "power_up", "powered_down", "powering_up",
    "reboot_issued", "reboot_req", "resv", "unknown",
)
_EXPORTER_COUNTS = ("comp", "err", "idle_power_save", "mix", "plnd")


def escape(value: str) -> str:
    """A label value as the text format wants it (backslash, quote, newline escaped)."""
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _header(name: str, help_text: str) -> str:
    return f"# HELP {name} {help_text}\n# TYPE {name} gauge\n"


def _slurm_counts(state: Any) -> list[str]:
    """Slurm's node-count buckets a state falls in (a node counts in several)."""
    base, flags = state.base, state.flags
    out = []
    if base in (Base.ALLOCATED,):
        out.append("alloc")
    elif base is Base.MIXED:
        out.append("mixed")
    elif base is Base.IDLE:
        out.append("idle")
    elif base is Base.DOWN:
        out.append("down")
    elif base is Base.FUTURE:
        out.append("future")
    elif base is Base.UNKNOWN:
        out.append("unknown")
    if Flag.DRAIN in flags:
        out.append("drain")
        out.append("draining" if base in (Base.ALLOCATED, Base.MIXED) else "drained")
    for flag, key in ((Flag.FAIL, "fail"), (Flag.NO_RESPOND, "noresp"),
                      (Flag.COMPLETING, "completing"), (Flag.CLOUD, "cloud"),
                      (Flag.INVALID_REG, "invalid_reg"), (Flag.POWER_DOWN, "power_down"),
                      (Flag.POWERED_DOWN, "powered_down"), (Flag.POWERING_UP, "powering_up"),
                      (Flag.MAINT, "maint"), (Flag.RESERVED, "resv"),
                      (Flag.REBOOT_REQUESTED, "reboot_req"), (Flag.REBOOT_ISSUED, "reboot_issued")):
        if flag in flags:
            out.append(key)
    return out


def _exporter_bucket(compact: str) -> str:
    """The exporter's one bucket per node, by its priority order over sinfo's compact name."""
    for word, bucket in (("alloc", "alloc"), ("comp", "comp"), ("down", "down"),
                         ("drain", "drain"), ("drng", "drain"), ("fail", "fail"),
                         ("err", "err"), ("plnd", "plnd")):
        if compact.startswith(word):
            return bucket
    if compact.startswith("idle"):
        return "idle_power_save" if compact.endswith(("~", "#", "%")) else "idle"
    if compact.startswith("mix"):
        return "mix"
    return ""


class _NodeLines:
    """One node's ready-made lines, valid while its state, config and hardware are the same."""

    __slots__ = ("alloc_cpus", "cfg", "cpus", "exporter", "gpu_tmpl", "gpu_tmpl_for", "hw",
                 "lines", "mem_free_tmpl", "slurm", "state", "unusable")

    def __init__(self, node: Any) -> None:
        cfg, st = node.cfg, node.state
        self.cfg, self.state, self.hw = cfg, st, node.hardware
        name = escape(cfg.name)
        long_name = escape(names.long(st))
        n = f'{{node="{name}"}}'
        ns = f'{{node="{name}",status="{long_name}"}}'
        cpus, alloc = cfg.cpus, st.cpus_alloc
        unusable = is_unusable(st)
        self.unusable, self.cpus, self.alloc_cpus = unusable, cpus, alloc
        free_cpus = cpus - alloc
        mem = cfg.real_memory
        gpus = cfg.gpus
        reason = st.reason
        source = reason.source.name.lower() if reason else ""
        values = (
            cpus, alloc, cpus, free_cpus, gpus, 0, mem * MIB, 0, mem * MIB,
            alloc, 0 if unusable else free_cpus, free_cpus if unusable else 0, cpus, 0, mem, gpus,
        )
        lines = [f"{fam[0]}{n if fam[2] == 'n' else ns} {v}\n"
                 for fam, v in zip(_NODE_FAMILIES, values, strict=False)]
        lines.append(f'ranch_node_state{{node="{name}",state="{long_name}",'
                     f'reason_source="{source}"}} 1\n')
        if reason is not None:
            lines.append(
                f'ranch_node_reason_timestamp_seconds{{node="{name}",'
                f'reason="{escape(reason.text)}",user="{escape(reason.user or "")}",'
                f'reason_source="{source}"}} {int(reason.time)}\n')
        else:
            lines.append("")
        self.lines = lines
        self.mem_free_tmpl = _template(f"slurm_node_memory_free_bytes{n} ")
        self.slurm = _slurm_counts(st)
        self.exporter = _exporter_bucket(names.compact(st))
        self.gpu_tmpl: tuple[bytes, ...] = ()
        self.gpu_tmpl_for = -1

    def fresh(self, node: Any) -> bool:
        return node.state is self.state and node.cfg is self.cfg and node.hardware is self.hw

    def gpu_templates(self, count: int) -> tuple[bytes, ...]:
        """Per GPU family, the template of this node's lines for as many GPUs as the heartbeat
        has: `NAME{labels} %d\n` per GPU, ready for one %-format of the GPUs' figures."""
        if self.gpu_tmpl_for == count:
            return self.gpu_tmpl
        infos: list[dict] = []
        if self.hw is not None:
            try:
                infos = list(orjson.loads(self.hw.json()).get("gpus") or ())
            except (orjson.JSONDecodeError, AttributeError):
                infos = []
        host = escape(self.cfg.name)
        labels = []
        for i in range(count):
            info = infos[i] if i < len(infos) else {}
            labels.append(
                f'{{gpu="{info.get("index", i)}",UUID="{escape(str(info.get("uuid", "")))}",'
                f'modelName="{escape(str(info.get("name", "")))}",Hostname="{host}"}} ')
        self.gpu_tmpl = tuple(b"".join([_template(fam + lab) for lab in labels])
                              for fam, _, _ in _GPU_FAMILIES)
        self.gpu_tmpl_for = count
        return self.gpu_tmpl


def _template(prefix: str) -> bytes:
    """`prefix` then one integer and a newline, as a bytes %-format (a label's own % doubled)."""
    return prefix.replace("%", "%%").encode() + b"%d\n"


class _ChunkTemplates:
    """The per-heartbeat families' templates of CHUNK nodes, kept while `key` (each node with
    figures: its lines and its packed metrics' length) is the same."""

    __slots__ = ("free", "gpus", "key")

    def __init__(self, key: tuple[tuple[_NodeLines, int], ...]) -> None:
        self.key = key
        self.free = b"".join([e.mem_free_tmpl for e, _ in key])
        per_node = [e.gpu_templates((n - PACKED_HEAD) // PER_GPU) for e, n in key
                    if n > PACKED_HEAD]
        self.gpus = tuple(b"".join([t[f] for t in per_node]) for f in range(len(_GPU_FAMILIES)))


class Exposition:
    """Builds /metrics text from the live node records; keeps what did not change."""

    def __init__(self) -> None:
        self._lines: dict[str, _NodeLines] = {}
        self._static: bytes = b""
        self._static_key: tuple = ()
        self._chunks: list[_ChunkTemplates | None] = []

    def steps(self, nodes: Any, out: list[bytes]) -> Iterator[None]:
        """Append the exposition to `out` (UTF-8 pieces, in order), yielding after each CHUNK
        nodes (the caller may let other tasks run there). `nodes` is the controller's
        name -> NodeRecord mapping."""
        items = list(nodes.values())
        cache = self._lines
        changed = len(cache) != len(items)
        entries: list[_NodeLines] = []
        for i, node in enumerate(items):
            e = cache.get(node.cfg.name)
            if e is None or not e.fresh(node):
                e = cache[node.cfg.name] = _NodeLines(node)
                changed = True
            entries.append(e)
            if i % CHUNK == CHUNK - 1:
                yield
        if changed or self._static_key != (len(entries),):
            if len(cache) > len(items):
                live = {n.cfg.name for n in items}
                for gone in [k for k in cache if k not in live]:
                    del cache[gone]
            parts: list[str] = []
            yield from self._static_text(entries, parts)
            self._static = "".join(parts).encode()
            self._static_key = (len(entries),)
            yield
        out.append(self._static)
        yield from self._dynamic(items, entries, out)

    def render(self, nodes: Any) -> str:
        """The whole text at once (tests, benchmarks)."""
        out: list[bytes] = []
        for _ in self.steps(nodes, out):
            pass
        return b"".join(out).decode()

    @staticmethod
    def _static_text(entries: list[_NodeLines], parts: list[str]) -> Iterator[None]:
        """What only state changes alter, into `parts`; yields between families."""
        slurm = dict.fromkeys(_SLURM_COUNTS, 0)
        exporter = dict.fromkeys(_EXPORTER_COUNTS, 0)
        cpus = {"alloc": 0, "idle": 0, "other": 0, "total": 0}
        for e in entries:
            for key in e.slurm:
                slurm[key] += 1
            if e.exporter in exporter:
                exporter[e.exporter] += 1
            cpus["alloc"] += e.alloc_cpus
            cpus["total"] += e.cpus
            cpus["other" if e.unusable else "idle"] += e.cpus - e.alloc_cpus
        parts.append(_header("slurm_nodes", "Total number of nodes"))
        parts.append(f"slurm_nodes {len(entries)}\n")
        for key in _SLURM_COUNTS:
            name = f"slurm_nodes_{key}"
            parts.append(_header(name, f"Number of nodes counted as {key} (Slurm's meaning)"))
            parts.append(f"{name} {slurm[key]}\n")
        for key in _EXPORTER_COUNTS:
            name = f"slurm_nodes_{key}"
            parts.append(_header(name, f"Nodes in sinfo state {key} (prometheus-slurm-exporter)"))
            parts.append(f"{name} {exporter[key]}\n")
        for key, value in cpus.items():
            name = f"slurm_cpus_{key}"
            parts.append(_header(name, f"CPUs {key} over all nodes (prometheus-slurm-exporter)"))
            parts.append(f"{name} {value}\n")
        for i, (name, help_text, _) in enumerate(_NODE_FAMILIES):
            yield
            parts.append(_header(name, help_text))
            parts.append("".join([e.lines[i] for e in entries]))

    def _dynamic(self, items: list, entries: list[_NodeLines], out: list[bytes]) -> Iterator[None]:
        """The per-heartbeat families: per chunk of nodes one %-format per family."""
        free: list[bytes] = []
        gpu: tuple[list[bytes], ...] = tuple([] for _ in _GPU_FAMILIES)
        chunks = self._chunks
        starts = range(0, len(items), CHUNK)
        del chunks[len(starts):]
        chunks.extend([None] * (len(starts) - len(chunks)))
        for c, start in enumerate(starts):
            live = [(e, node.metrics) for node, e in zip(
                items[start:start + CHUNK], entries[start:start + CHUNK], strict=True)
                if node.metrics is not None]
            key = tuple([(e, len(mt)) for e, mt in live])
            tmpl = chunks[c]
            if tmpl is None or tmpl.key != key:
                tmpl = chunks[c] = _ChunkTemplates(key)
            packed = [mt for _, mt in live]
            free.append(tmpl.free % tuple([(int(mt[3]) - int(mt[2])) * MIB for mt in packed]))
            if tmpl.gpus[0]:
                # Every GPU record of the chunk end to end (one copy in C), so each family's
                # figures are one strided slice of it.
                figures = array("d")
                figures.frombytes(b"".join([memoryview(mt)[PACKED_HEAD:] for mt in packed]))
                for lines, t, off in zip(gpu, tmpl.gpus, _GPU_OFFSETS, strict=True):
                    lines.append(t % tuple(figures[off::PER_GPU]))
            yield
        out.append(_header(*_FREE_MEM).encode())
        out.extend(free)
        for (name, help_text, _), lines in zip(_GPU_FAMILIES, gpu, strict=True):
            yield
            out.append(_header(name, help_text).encode())
            out.extend(lines)


def reservations_text(items: Any) -> str:
    """Reservations (issue 33): how many are open and waiting, and each one's window and size."""
    out = [_header("ranch_reservations", "Reservations by state: ACTIVE (window open) or "
                                         "INACTIVE (ahead)")]
    active = sum(1 for r in items if r["state"] == "ACTIVE")
    out.append(f'ranch_reservations{{state="ACTIVE"}} {active}\n')
    out.append(f'ranch_reservations{{state="INACTIVE"}} {len(items) - active}\n')
    out.append(_header("ranch_reservation_nodes", "Nodes a reservation holds"))
    for r in items:
        labels = (f'reservation="{escape(r["name"])}",state="{r["state"]}",'
                  f'flags="{escape(",".join(r["flags"]))}"')
        out.append(f"ranch_reservation_nodes{{{labels}}} {r['node_count']}\n")
    out.append(_header("ranch_reservation_start_seconds", "Start of a reservation's window "
                                                         "(epoch seconds)"))
    for r in items:
        out.append(f'ranch_reservation_start_seconds{{reservation="{escape(r["name"])}"}} '
                   f'{r["start_time"]:.0f}\n')
    out.append(_header("ranch_reservation_end_seconds", "End of a reservation's window "
                                                       "(epoch seconds)"))
    for r in items:
        out.append(f'ranch_reservation_end_seconds{{reservation="{escape(r["name"])}"}} '
                   f'{r["end_time"]:.0f}\n')
    return "".join(out)


def guards_text(guards: Any, controller: dict[str, Any]) -> str:
    """Ranch's guards (issue 18): whether each is tripped and how many nodes it holds back, and
    the controller's own stalls (ctld/nodes/guards.py, ctld/nodes/stalls.py)."""
    out = [_header("ranch_guard_tripped",
                   "1 while a guard is tripped: DownGuard holds silent nodes NOT_RESPONDING "
                   "instead of DOWN, DrainGuard pauses health-check drains")]
    out += [f'ranch_guard_tripped{{guard="{g["guard"]}"}} {int(g["state"] == "TRIPPED")}\n'
            for g in guards]
    out.append(_header("ranch_guard_nodes",
                       "Nodes a guard holds back (DownGuard: held, DrainGuard: drains paused)"))
    out += [f'ranch_guard_nodes{{guard="{g["guard"]}"}} {g["count"]}\n' for g in guards]
    counters = (
        ("ranch_controller_stalls_total", "stalls",
         "Stalls of the controller itself (event-loop gaps, host suspends) it did not judge "
         "nodes on"),
        ("ranch_controller_stall_seconds_total", "stalled_seconds",
         "Seconds the controller itself was stalled"),
        ("ranch_controller_clock_jumps_total", "clock_jumps",
         "Steps of the controller's wall clock"),
    )
    for name, key, help_text in counters:
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} counter\n"
                   f"{name} {controller.get(key, 0)}\n")
    out.append(_header("ranch_controller_last_stall_seconds",
                       "Length of the controller's last stall"))
    out.append(f"ranch_controller_last_stall_seconds {controller.get('last_stall_seconds', 0)}\n")
    return "".join(out)
