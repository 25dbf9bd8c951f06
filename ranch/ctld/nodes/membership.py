"""Who is a node of the cluster: NodeApproval (PENDING until approved), rejection, dynamic
nodes (MaxNodeCount, `rnoded --dynamic`) and `rcontrol approve|reject|delete`.

Every state change goes through the transition table (Registry.apply_event); this module decides
which event to feed, creates and drops the records of dynamic nodes, and logs membership events.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ranch.conf.build import parse_config_text
from ranch.conf.errors import ConfigError
from ranch.conf.model import NodeConfig
from ranch.ctld import logs
from ranch.ctld.nodes.node import NodeRecord
from ranch.protocol import messages as m
from ranch.protocol.codec import converter
from ranch.statemachine import events
from ranch.statemachine.model import Flag, initial_state

if TYPE_CHECKING:
    from ranch.ctld.ports import Registry

ACTIONS = ("approve", "reject", "delete")
# Keys of a dynamic node's line that its hardware report fills in (its --conf may override).
_HW_KEYS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore",
            "RealMemory", "TmpDisk", "Gres")


def hold_new(cluster: Registry, node_names: Iterable[str]) -> None:
    """Under NodeApproval=manual, nodes new to the cluster wait for `rcontrol approve`
    (NodeApprovalAuto names excepted). The table ignores this for a node already known."""
    cfg = cluster.config
    if cfg.auth.node_approval != "manual":
        return
    auto = set(cfg.membership.node_approval_auto)
    wall = cluster.wall()
    for name in node_names:
        node = cluster.nodes.get(name)
        if node is not None and name not in auto and node.last_registration is None:
            cluster.apply_event(node, events.AwaitApproval(now=wall))


def on_start(cluster: Registry, restored: Iterable[str]) -> None:
    """At controller start: hold the nodes the saved state did not know."""
    known = set(restored)
    hold_new(cluster, [n for n in cluster.nodes if n not in known])


def admit(cluster: Registry, msg: m.Register, peer: str) -> m.RegisterReply | None:
    """A refusal for this registration, or None to go on (a dynamic node's record is made)."""
    node = cluster.nodes.get(msg.name)
    if node is None:
        problem = _create_dynamic(cluster, msg)
        if problem is None:
            return None
        return _refuse(cluster, msg.name, peer, problem)
    if Flag.REJECTED in node.state.flags:
        # the table refuses a rejected node's registration (no change made); its message says why
        _, err = cluster.apply_event(node, events.Registered(now=cluster.wall()))
        if err is not None:
            return _refuse(cluster, msg.name, peer, err)
    return None


def _refuse(cluster: Registry, name: str, peer: str, reason: str) -> m.RegisterReply:
    logs.event("registration rejected", logging.WARNING, node=name, peer=peer, reason=reason)
    cluster.eventlog.add("refused", name, reason=reason, peer=peer)
    return m.RegisterReply(accepted=False, reason=reason)


# -- dynamic nodes ----------------------------------------------------------------------------


def node_config(name: str, hw: m.Hardware, conf: str) -> NodeConfig:
    """The NodeName line of a dynamic node: its reported hardware, then its --conf keys (which
    win). Raises ConfigError naming the bad key."""
    try:
        extra = shlex.split(conf)
    except ValueError as exc:
        raise ValueError(f"--conf {conf!r}: {exc}") from None
    given = {word.partition("=")[0].lower() for word in extra}
    if given & {"nodename", "state"}:
        raise ValueError("--conf may not set NodeName or State")
    sockets = max(1, hw.sockets // max(1, hw.boards))
    values: dict[str, int | str] = {
        "CPUs": hw.cpus, "Boards": hw.boards, "SocketsPerBoard": sockets,
        "CoresPerSocket": hw.cores_per_socket, "ThreadsPerCore": hw.threads_per_core,
        "RealMemory": hw.real_memory_mib, "TmpDisk": hw.tmp_disk_mib}
    if hw.gpus:
        values["Gres"] = f"gpu:{len(hw.gpus)}"
    words = [f"NodeName={name}"]
    words += [f"{k}={v}" for k, v in values.items() if k.lower() not in given]
    words += [_quote(w) for w in extra]
    cfg = parse_config_text(" ".join(words) + "\n", path="<dynamic node>", strict=True)
    return cfg.nodes[0]


def _quote(word: str) -> str:
    key, sep, value = word.partition("=")
    return f'{key}="{value}"' if sep and " " in value else word


def _create_dynamic(cluster: Registry, msg: m.Register) -> str | None:
    """Make the record of a node that registers with --dynamic; the refusal reason, if any."""
    cfg = cluster.config
    limit = cfg.membership.max_node_count
    if not msg.dynamic:
        hint = (" or start rnoded with --dynamic" if limit > 0 else "")
        return (f"node {msg.name} is not in the config ({cfg.path} names {len(cluster.nodes)} "
                f"node(s); add a NodeName line for it and reconfigure{hint})")
    if limit <= 0:
        return (f"node {msg.name} asked to join as a dynamic node, but dynamic nodes are off "
                f"(set MaxNodeCount in {cfg.path})")
    if len(cluster.nodes) >= limit:
        return (f"node {msg.name} cannot join: MaxNodeCount={limit} reached "
                f"({len(cluster.nodes)} nodes)")
    try:
        ncfg = node_config(msg.name, msg.hardware, msg.dynamic_conf)
    except ConfigError as exc:
        return "dynamic node " + "; ".join(d.message for d in exc.errors)
    except ValueError as exc:
        return f"dynamic node {msg.name}: {exc}"
    node = _add_record(cluster, ncfg, msg.dynamic_conf)
    logs.event("dynamic node joined", node=msg.name, cpus=ncfg.cpus,
               partitions=",".join(node.partitions) or "-")
    cluster.eventlog.add("joined", msg.name, dynamic=True, conf=msg.dynamic_conf or None,
                         partitions=list(node.partitions))
    hold_new(cluster, [msg.name])
    return None


def _add_record(cluster: Registry, ncfg: NodeConfig, conf: str) -> NodeRecord:
    now = cluster.clock()
    node = NodeRecord(cfg=ncfg, partitions=partitions_for(cluster, ncfg.name),
                      state=initial_state(ncfg.name, ncfg.cpus))
    node.set_state(node.state)
    node.last_heard = now
    node.idle_since = now
    node.dynamic_conf = conf
    cluster.add_node(node)
    _join_partitions(cluster, node)
    cluster.mark_changed(node)
    return node


def partitions_for(cluster: Registry, name: str) -> tuple[str, ...]:
    """Partitions with Nodes=ALL or that name the node."""
    return tuple(p.name for p in cluster.config.partitions
                 if p.all_nodes or name in p.dynamic_nodes)


def _join_partitions(cluster: Registry, node: NodeRecord) -> None:
    for pname in node.partitions:
        members = cluster.partition_nodes(pname)
        if members is not None and node.name not in members:
            members.append(node.name)
            cluster.members_changed()


def restore_dynamic(cluster: Registry, name: str, entry: dict[str, Any]) -> NodeRecord | None:
    """A dynamic node saved with the state: its record made again from its saved hardware."""
    conf = entry.get("dynamic_conf")
    hw = entry.get("hardware")
    if conf is None or not hw:
        return None
    try:
        ncfg = node_config(name, converter.structure(hw, m.Hardware), conf)
    except (ConfigError, ValueError, TypeError, KeyError) as exc:
        logs.event("saved dynamic node unreadable; dropped", logging.WARNING, node=name,
                   error=repr(exc))
        return None
    return _add_record(cluster, ncfg, conf)


def carry_dynamic(cluster: Registry, old: dict[str, NodeRecord],
                  new: dict[str, NodeRecord]) -> None:
    """Reconfigure keeps dynamic nodes (a NodeName line for one takes it over)."""
    for name, node in old.items():
        if node.dynamic_conf is None:
            continue
        if name in new:  # defined in the config now: an ordinary node from here on
            node.dynamic_conf = None
            continue
        node.partitions = partitions_for(cluster, name)
        new[name] = node
        _join_partitions(cluster, node)


# -- admin actions ----------------------------------------------------------------------------


def handle(cluster: Registry, msg: m.NodeMembership) -> m.UpdateResult:
    action = msg.action.lower()
    if action not in ACTIONS:
        return m.UpdateResult(ok=False, errors=(
            f"action: {msg.action!r} is not one of {', '.join(ACTIONS)}",))
    node_names, errors = cluster.expand(msg.node_names)
    if errors:
        return m.UpdateResult(ok=False, errors=tuple(errors))
    wall = cluster.wall()
    user = msg.user or None
    reason = (msg.reason or "").strip() or None
    changed: list[str] = []
    errs: list[str] = []
    for name in node_names:
        node = cluster.nodes[name]
        if action == "delete":
            err = _delete(cluster, node, msg.user)
        else:
            event: Any = (events.Approve(now=wall, user=msg.user) if action == "approve"
                          else events.Reject(now=wall, reason=reason, user=msg.user))
            ok, err = cluster.apply_event(node, event)
            if ok:
                cluster.eventlog.add("approved" if action == "approve" else "rejected", name,
                                     user=user, reason=reason)
        if err:
            errs.append(err)
        else:
            changed.append(name)
    cluster.flush_programs()
    logs.event(f"{action} nodes", nodes=msg.node_names, user=msg.user or "-",
               changed=len(changed), refused=len(errs))
    return m.UpdateResult(ok=not errs, changed=tuple(changed), errors=tuple(errs))


def _delete(cluster: Registry, node: NodeRecord, user: str) -> str | None:
    name = node.name
    if node.dynamic_conf is None:
        return (f"cannot delete node {name}: it is defined in {cluster.config.path}; remove its "
                "NodeName line and reconfigure")
    use = cluster.jobs.store.uses.get(name)
    if use is not None and use.jobs:
        jobs = ",".join(map(str, sorted(use.jobs)))
        return f"cannot delete node {name}: it runs job(s) {jobs}; drain it and let them end"
    _, err = cluster.apply_event(node, events.Delete(now=cluster.wall(), user=user))
    if err:
        return err
    del cluster.nodes[name]
    for kind in ("hb", "suspend", "resume"):
        cluster.deadlines.cancel((name, kind))
    for pname in node.partitions:
        members = cluster.partition_nodes(pname)
        if members is not None and name in members:
            members.remove(name)
            cluster.members_changed()
    cluster.mark_changed(node)
    logs.event("dynamic node deleted", node=name, user=user or "-")
    cluster.eventlog.add("deleted", name, user=user or None)
    return None
