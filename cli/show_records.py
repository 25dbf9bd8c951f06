"""`rcontrol show node|partition`: scontrol's Key=Value records (multi-line or -o) and --json."""

from __future__ import annotations

from collections.abc import Callable

from cli import node_records as nr

Fold = Callable[[list[str]], str]
INDENT = "   "
# Node-record keys each view reads (GetSnapshot.fields); `arch`/`os` print when a record has them.
NODE_READS = (
    "name", "arch", "os", "cores_per_socket", "cpus", "cpus_alloc", "cpu_load", "features",
    "gres", "addr", "hostname", "version", "real_memory", "alloc_mem", "free_mem", "sockets",
    "boards", "complete", "threads_per_core", "tmp_disk", "weight", "partitions", "boot_time",
    "slurmd_start_time", "last_busy", "state", "health", "last_change",
    "last_power_action",
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
    if n.get("partitions"):
        lines.append(f"Partitions={','.join(n['partitions'])}")
    lines += [
        f"BootTime={_time(n.get('boot_time'))} SlurmdStartTime={_time(n.get('slurmd_start_time'))}",
        f"LastBusyTime={_time(n.get('last_busy'))} ResumeAfterTime=None "
        f"LastChange={_time(n.get('last_change'))}",
        f"CfgTRES={_tres(n['cpus'], n['real_memory'], n.get('gres') or '')}",
        "AllocTRES=" + (f"cpu={n['cpus_alloc']}" if n["cpus_alloc"] else ""),
        "CurrentWatts=0 AveWatts=0",
    ]
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
    from conf.timefmt import format_limit

    members = [nodes_by_name[name] for name in p.get("nodes") or () if name in nodes_by_name]
    cpus = sum(n["cpus"] for n in members)
    mem = sum(n["real_memory"] for n in members)
    max_time = p.get("max_time")
    default_time = p.get("default_time")
    yes_no = {True: "YES", False: "NO"}
    return [
        f"PartitionName={p['name']}",
        "AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL",
        f"AllocNodes=ALL Default={yes_no[bool(p.get('default'))]} QoS=N/A",
        f"DefaultTime={'NONE' if default_time is None else format_limit(default_time)} "
        f"DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden={yes_no[bool(p.get('hidden'))]}",
        f"MaxNodes=UNLIMITED MaxTime={'UNLIMITED' if max_time is None else format_limit(max_time)}"
        " MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED MaxCPUsPerSocket=UNLIMITED",
        f"Nodes={fold(list(p['nodes'])) if p.get('nodes') else '(null)'}",
        "PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO",
        "OverTimeLimit=NONE PreemptMode=OFF",
        f"State={p.get('state', 'UP')} TotalCPUs={cpus} TotalNodes={len(p.get('nodes') or ())} "
        "SelectTypeParameters=NONE",
        "JobDefaults=(null)",
        "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED",
        f"TRES={_tres(cpus, mem, '', nodes=len(p.get('nodes') or ()))}",
    ]


def records_text(records: list[list[str]], *, one_line: bool) -> str:
    """Multi-line records separated by a blank line, or one line per record with -o."""
    if one_line:
        return "".join([" ".join(lines) + "\n" for lines in records])
    # One join per record: scontrol's layout is the lines joined by newline + indent.
    sep = "\n" + INDENT
    return "".join([sep.join(lines) + "\n\n" for lines in records])


def node_json(n: dict) -> dict:
    from cli.sinfo_json import number, state_array

    reason = nr.reason_of(n) or {}
    load = n.get("cpu_load")
    return {
        "name": n["name"],
        "hostname": n.get("hostname") or "",
        "address": n.get("addr") or "",
        "port": n.get("port") or 0,
        "architecture": n.get("arch") or "",
        "operating_system": n.get("os") or "",
        "state": state_array(n),
        "partitions": list(n.get("partitions") or ()),
        "cpus": n["cpus"],
        "alloc_cpus": n["cpus_alloc"],
        "alloc_idle_cpus": n["cpus"] - n["cpus_alloc"],
        "effective_cpus": n["cpus"],
        "cpu_load": 0 if load is None else round(load * 100),
        "boards": n["boards"],
        "sockets": n["sockets"],
        "cores": n["cores_per_socket"],
        "threads": n["threads_per_core"],
        "real_memory": n["real_memory"],
        "alloc_memory": n.get("alloc_mem") or 0,
        "free_mem": number(n.get("free_mem")),
        "tmp_disk": n["tmp_disk"],
        "weight": n["weight"],
        "features": list(n.get("features") or ()),
        "active_features": list(n.get("features") or ()),
        "gres": n.get("gres") or "",
        "gres_used": n.get("gres_used") or "",
        "version": n.get("version") or "",
        "boot_time": number(_int_time(n.get("boot_time"))),
        "slurmd_start_time": number(_int_time(n.get("slurmd_start_time"))),
        "last_busy": number(_int_time(n.get("last_busy"))),
        "reason": reason.get("text") or "",
        "reason_changed_at": number(_int_time(reason.get("time"))),
        "reason_set_by_user": nr.reason_user(reason) if reason else "",
        "health": n.get("health"),
        "last_power_action": n.get("last_power_action"),
        "last_change": number(_int_time(n.get("last_change"))),  # Ranch (issue 13)
        "approval": next((w for w in ("PENDING", "REJECTED")
                          if w in ((n.get("state") or {}).get("flags") or ())), "APPROVED"),
        "dynamic": bool(n.get("dynamic")),
    }


def _int_time(epoch: float | None) -> int | None:
    return int(epoch) if epoch else None


def partition_json(p: dict, nodes_by_name: dict[str, dict], fold: Fold, cluster: str) -> dict:
    from cli.sinfo_json import partition_doc

    doc = partition_doc(p, fold, cluster)
    members = [nodes_by_name[n] for n in p.get("nodes") or () if n in nodes_by_name]
    doc["cpus"] = {"total": sum(n["cpus"] for n in members)}
    return doc
