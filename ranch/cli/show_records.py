"""`rcontrol show node|partition`: scontrol's Key=Value records (multi-line or -o) and --json."""

from __future__ import annotations

from ranch.cli import node_records as nr
from ranch.protocol.records import node_json, partition_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Fold = Callable[[list[str]], str]

INDENT = "   "
# Node-record keys each view reads (GetSnapshot.fields); `arch`/`os` print when a record has them.
NODE_READS = (
    "name", "arch", "os", "cores_per_socket", "cpus", "cpus_alloc", "cpu_load", "features",
    "gres", "addr", "hostname", "version", "real_memory", "alloc_mem", "free_mem", "sockets",
    "boards", "complete", "threads_per_core", "tmp_disk", "weight", "partitions", "boot_time",
    "slurmd_start_time", "last_busy", "state", "health", "last_change",
    "last_power_action", "next_state",
)
PARTITION_READS = ("name", "cpus", "real_memory")


def _time(epoch: float | None) -> str:
    return nr.iso_time(epoch, missing="None")


def last_power_action(action: dict | None) -> str:
    """`resume rc=0 at 2026-11-22T22:01:02`: the node's last power program and its outcome."""
    if not action:
        return "None"
    word, when = action.get("action", "?"), _time(action.get("time"))
    if action.get("waiting"):
        return f"{word} waiting for ResumeRate since {when}"
    if action.get("running"):
        return f"{word} running since {when}"
    text = f"{word} rc={action.get('rc')} at {when}"
    return f"{text} ({action['error']})" if action.get("error") else text


def _tres(cpus: int, mem: int, gres: str, nodes: int | None = None) -> str:
    items = [f"cpu={cpus}", f"mem={mem}M"]
    if nodes is not None:
        items.append(f"node={nodes}")
    items.append(f"billing={cpus}")
    for g in gres.split(",") if gres else ():
        name, _, count = g.rpartition(":")
        if name and count.isdigit():
            items.append(f"gres/{name.split(':')[0]}={count}")
    return ",".join(items)


def node_lines(n: dict) -> list[str]:
    """One node as scontrol prints it: first line unindented, the rest indented."""
    load = n.get("cpu_load")
    free = n.get("free_mem")
    features = ",".join(n.get("features") or ()) or "(null)"
    head = f"NodeName={n['name']}"
    if n.get("arch"):
        head += f" Arch={n['arch']}"
    head += f" CoresPerSocket={n['cores_per_socket']}"
    lines = [
        head,
        f"CPUAlloc={n['cpus_alloc']} CPUEfctv={n['cpus']} CPUTot={n['cpus']} "
        f"CPULoad={'N/A' if load is None else f'{load:.2f}'}",
        f"AvailableFeatures={features}",
        f"ActiveFeatures={features}",
        f"Gres={n.get('gres') or '(null)'}",
        f"NodeAddr={n.get('addr') or n['name']} NodeHostName={n.get('hostname') or n['name']} "
        f"Version={n.get('version') or 'N/A'}",
    ]
    if n.get("os"):
        lines.append(f"OS={n['os']}")
    lines += [
        f"RealMemory={n['real_memory']} AllocMem={n.get('alloc_mem') or 0} "
        f"FreeMem={'N/A' if free is None else free} Sockets={n['sockets']} Boards={n['boards']}",
        f"State={n['complete']} ThreadsPerCore={n['threads_per_core']} TmpDisk={n['tmp_disk']} "
        f"Weight={n['weight']} Owner=N/A MCS_label=N/A",
    ]
    if n.get("next_state"):  # a pending or issued reboot's nextstate (issue 33)
        lines.append(f"NextState={n['next_state']}")
    if n.get("partitions"):
        lines.append(f"Partitions={','.join(n['partitions'])}")
    lines += [
        f"BootTime={_time(n.get('boot_time'))} SlurmdStartTime={_time(n.get('slurmd_start_time'))}",
        # 22.05 prints Unknown for a node never busy nor registered (and no ResumeAfterTime);
        # LastChange is Ranch's own (issue 13).
        f"LastBusyTime={nr.iso_time(n.get('last_busy'), missing='Unknown')} "
        f"LastChange={_time(n.get('last_change'))}",
        f"CfgTRES={_tres(n['cpus'], n['real_memory'], n.get('gres') or '')}",
        "AllocTRES=" + (f"cpu={n['cpus_alloc']}" if n["cpus_alloc"] else ""),
        "CapWatts=n/a",
        "CurrentWatts=0 AveWatts=0",
        "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
    ]
    return lines + _node_remarks(n)


def _node_remarks(n: dict) -> list[str]:
    """The node's last lines, each only where it applies: its last power action, its approval,
    its reason, its health."""
    lines = []
    if n.get("last_power_action"):  # only nodes power save has acted on
        lines.append(f"LastPowerAction={last_power_action(n['last_power_action'])}")
    flags = (n.get("state") or {}).get("flags") or ()
    for word in ("PENDING", "REJECTED"):  # membership (issue 13)
        if word in flags:
            lines.append(f"Approval={word}")
    reason = nr.reason_of(n)
    if reason and reason.get("text"):
        lines.append(
            f"Reason={reason['text']} [{nr.reason_user(reason)}@{_time(reason.get('time'))}]"
        )
    health = n.get("health") or {}
    if health.get("verdict") not in (None, "ok"):
        message = health.get("message") or ""
        lines.append(f"Health={health['verdict'].upper()}: {message}".rstrip(": "))
    for warning in health.get("warnings") or ():
        lines.append(f"Health=WARNING: {warning}")
    return lines


def partition_lines(p: dict, nodes_by_name: dict[str, dict], fold: Fold) -> list[str]:
    """One partition as scontrol 22.05 prints it, every key from the configured options."""
    from ranch.cli.partition_options import PartOptions
    from ranch.conf.timefmt import format_limit

    members = [nodes_by_name[name] for name in p.get("nodes") or () if name in nodes_by_name]
    cpus = sum(n["cpus"] for n in members)
    mem = sum(n["real_memory"] for n in members)
    max_time = p.get("max_time")
    default_time = p.get("default_time")
    o = PartOptions(p)
    yes_no = {True: "YES", False: "NO"}
    alternate = o.raw("Alternate")
    lines = [
        f"PartitionName={p['name']}",
        f"AllowGroups={o.text('AllowGroups', 'ALL')} {o.access('AllowAccounts', 'DenyAccounts')} "
        f"{o.access('AllowQos', 'DenyQos')}",
        f"AllocNodes={o.text('AllocNodes', 'ALL')}"
        + (f" Alternate={alternate}" if alternate else "")
        + f" Default={yes_no[bool(p.get('default'))]} QoS={o.text('QOS', 'N/A')}",
        f"DefaultTime={'NONE' if default_time is None else format_limit(default_time)} "
        f"DisableRootJobs={o.yes_no('DisableRootJobs')} ExclusiveUser={o.yes_no('ExclusiveUser')} "
        f"GraceTime={o.text('GraceTime', '0')} Hidden={yes_no[bool(p.get('hidden'))]}",
        f"MaxNodes={o.number('MaxNodes', 'UNLIMITED')} "
        f"MaxTime={'UNLIMITED' if max_time is None else format_limit(max_time)} "
        f"MinNodes={o.text('MinNodes', '0')} LLN={o.yes_no('LLN')} "
        f"MaxCPUsPerNode={o.number('MaxCPUsPerNode', 'UNLIMITED')}",
        f"Nodes={fold(list(p['nodes'])) if p.get('nodes') else '(null)'}",
        f"PriorityJobFactor={o.priority('PriorityJobFactor')} "
        f"PriorityTier={o.priority('PriorityTier')} RootOnly={o.yes_no('RootOnly')} "
        f"ReqResv={o.yes_no('ReqResv')} OverSubscribe={o.oversubscribe()}",
        f"OverTimeLimit={o.over_time_limit()} PreemptMode={o.text('PreemptMode', 'OFF').upper()}",
        f"State={p.get('state', 'UP')} TotalCPUs={cpus} TotalNodes={len(p.get('nodes') or ())} "
        f"SelectTypeParameters={o.text('SelectTypeParameters', 'NONE')}",
        f"JobDefaults={o.job_defaults()}",
        f"{o.mem('DefMemPerCPU', 'DefMemPerNode')} {o.mem('MaxMemPerCPU', 'MaxMemPerNode')}",
        f"TRES={_tres(cpus, mem, '', nodes=len(p.get('nodes') or ()))}",
    ]
    weights = o.raw("TRESBillingWeights")
    if weights:
        lines.append(f"TRESBillingWeights={weights}")
    return lines


def records_text(records: list[list[str]], *, one_line: bool) -> str:
    """Multi-line records separated by a blank line, or one line per record with -o."""
    if one_line:
        return "".join([" ".join(lines) + "\n" for lines in records])
    # One join per record: scontrol's layout is the lines joined by newline + indent.
    sep = "\n" + INDENT
    return "".join([sep.join(lines) + "\n\n" for lines in records])


__all__ = ["node_json", "node_lines", "partition_json", "partition_lines", "records_text"]
