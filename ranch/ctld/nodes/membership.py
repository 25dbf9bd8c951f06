"""Who is a node of the cluster: NodeApproval (PENDING until approved), rejection, dynamic
nodes (MaxNodeCount, `rnoded --dynamic`) and `rcontrol approve|reject|delete`.

Every state change goes through the transition table (NodeRegistry.apply_event); this module
decides which event to feed, creates and drops the records of dynamic nodes, and logs membership
events.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ranch.conf.build import parse_config_text
from ranch.conf.errors import ConfigError
from ranch.conf.model import NodeConfig
from ranch.ctld import logs
from ranch.ctld.deadlines import Deadlines
from ranch.ctld.nodes import nodeupdates
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.nodes.node import NodeRecord
from ranch.protocol import messages as m
from ranch.protocol.codec import converter
from ranch.statemachine import events
from ranch.statemachine.model import Flag, initial_state

if TYPE_CHECKING:
    from ranch.ctld.nodes.ports import Members

ACTIONS = ("approve", "reject", "delete")
# Keys of a dynamic node's line that its hardware report fills in (its --conf may override).
_HW_KEYS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore",
            "RealMemory", "TmpDisk", "Gres")


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


class Membership:
    """Who may join, who joined, who leaves: the registry's node list and partitions' members
    as approval, rejection and dynamic nodes change them."""

    def __init__(self, book: Members, *, clock: Callable[[], float], wall: Callable[[], float],
                 deadlines: Deadlines, eventlog: EventLog,
                 jobs_holding: Callable[[Sequence[str]], list[tuple[int, list[str]]]],
                 after_change: Callable[[], None]) -> None:
        """`jobs_holding`: the jobs on the named nodes (the job side's answer); `after_change`:
        the programs and the scheduling pass an admin action sets off."""
        self.book = book
        self.clock = clock
        self.wall = wall
        self.deadlines = deadlines
        self.eventlog = eventlog
        self.jobs_holding = jobs_holding
        self.after_change = after_change

    def hold_new(self, node_names: Iterable[str]) -> None:
        """Under NodeApproval=manual, nodes new to the cluster wait for `rcontrol approve`
        (NodeApprovalAuto names excepted). The table ignores this for a node already known."""
        cfg = self.book.config
        if cfg.auth.node_approval != "manual":
            return
        auto = set(cfg.membership.node_approval_auto)
        wall = self.wall()
        for name in node_names:
            node = self.book.nodes.get(name)
            if node is not None and name not in auto and node.last_registration is None:
                self.book.apply_event(node, events.AwaitApproval(now=wall))

    def on_start(self, restored: Iterable[str]) -> None:
        """At controller start: hold the nodes the saved state did not know."""
        known = set(restored)
        self.hold_new([n for n in self.book.nodes if n not in known])

    def admit(self, msg: m.Register, peer: str) -> m.RegisterReply | None:
        """A refusal for this registration, or None to go on (a dynamic node's record is made)."""
        node = self.book.nodes.get(msg.name)
        if node is None:
            problem = self._create_dynamic(msg)
            if problem is None:
                return None
            return self._refuse(msg.name, peer, problem)
        if Flag.REJECTED in node.state.flags:
            # the table refuses a rejected node's registration (no change made); its message
            # says why
            _, err = self.book.apply_event(node, events.Registered(now=self.wall()))
            if err is not None:
                return self._refuse(msg.name, peer, err)
        return None

    def _refuse(self, name: str, peer: str, reason: str) -> m.RegisterReply:
        logs.event("registration rejected", logging.WARNING, node=name, peer=peer, reason=reason)
        self.eventlog.add("refused", name, reason=reason, peer=peer)
        return m.RegisterReply(accepted=False, reason=reason)

    def _create_dynamic(self, msg: m.Register) -> str | None:
        """Make the record of a node that registers with --dynamic; the refusal reason, if any."""
        cfg = self.book.config
        limit = cfg.membership.max_node_count
        if not msg.dynamic:
            hint = (" or start rnoded with --dynamic" if limit > 0 else "")
            return (f"node {msg.name} is not in the config ({cfg.path} names "
                    f"{len(self.book.nodes)} node(s); add a NodeName line for it and "
                    f"reconfigure{hint})")
        if limit <= 0:
            return (f"node {msg.name} asked to join as a dynamic node, but dynamic nodes are off "
                    f"(set MaxNodeCount in {cfg.path})")
        if len(self.book.nodes) >= limit:
            return (f"node {msg.name} cannot join: MaxNodeCount={limit} reached "
                    f"({len(self.book.nodes)} nodes)")
        try:
            ncfg = node_config(msg.name, msg.hardware, msg.dynamic_conf)
        except ConfigError as exc:
            return "dynamic node " + "; ".join(d.message for d in exc.errors)
        except ValueError as exc:
            return f"dynamic node {msg.name}: {exc}"
        node = self._add_record(ncfg, msg.dynamic_conf)
        logs.event("dynamic node joined", node=msg.name, cpus=ncfg.cpus,
                   partitions=",".join(node.partitions) or "-")
        self.eventlog.add("joined", msg.name, dynamic=True, conf=msg.dynamic_conf or None,
                          partitions=list(node.partitions))
        self.hold_new([msg.name])
        return None

    def _add_record(self, ncfg: NodeConfig, conf: str) -> NodeRecord:
        now = self.clock()
        node = NodeRecord(cfg=ncfg, partitions=self.partitions_for(ncfg.name),
                          state=initial_state(ncfg.name, ncfg.cpus))
        node.set_state(node.state)
        node.last_heard = now
        node.idle_since = now
        node.dynamic_conf = conf
        self.book.add_node(node)
        self.book.join_partitions(node)
        self.book.mark_changed(node)
        return node

    def partitions_for(self, name: str) -> tuple[str, ...]:
        """Partitions with Nodes=ALL or that name the node."""
        return tuple(p.name for p in self.book.config.partitions
                     if p.all_nodes or name in p.dynamic_nodes)

    def restore_dynamic(self, name: str, entry: dict[str, Any]) -> NodeRecord | None:
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
        return self._add_record(ncfg, conf)

    def carry_dynamic(self, old: Mapping[str, NodeRecord],
                      defined: Container[str]) -> list[NodeRecord]:
        """Reconfigure keeps dynamic nodes (a NodeName line for one takes it over): the records
        to keep beside the `defined` ones, in their new partitions."""
        carried: list[NodeRecord] = []
        for name, node in old.items():
            if node.dynamic_conf is None:
                continue
            if name in defined:  # defined in the config now: an ordinary node from here on
                node.dynamic_conf = None
                continue
            node.partitions = self.partitions_for(name)
            carried.append(node)
            self.book.join_partitions(node)
        return carried

    # -- admin actions ----------------------------------------------------------------------------

    def handle(self, msg: m.NodeMembership) -> m.UpdateResult:
        action = msg.action.lower()
        if action not in ACTIONS:
            return m.UpdateResult(ok=False, errors=(
                f"action: {msg.action!r} is not one of {', '.join(ACTIONS)}",))
        node_names, errors = nodeupdates.expand(self.book.nodes, msg.node_names)
        if errors:
            return m.UpdateResult(ok=False, errors=tuple(errors))
        wall = self.wall()
        user = msg.user or None
        reason = (msg.reason or "").strip() or None
        changed: list[str] = []
        errs: list[str] = []
        for name in node_names:
            node = self.book.nodes[name]
            if action == "delete":
                err = self._delete(node, msg.user)
            else:
                event: Any = (events.Approve(now=wall, user=msg.user) if action == "approve"
                              else events.Reject(now=wall, reason=reason, user=msg.user))
                ok, err = self.book.apply_event(node, event)
                if ok:
                    self.eventlog.add("approved" if action == "approve" else "rejected", name,
                                      user=user, reason=reason)
            if err:
                errs.append(err)
            else:
                changed.append(name)
        self.after_change()
        logs.event(f"{action} nodes", nodes=msg.node_names, user=msg.user or "-",
                   changed=len(changed), refused=len(errs))
        return m.UpdateResult(ok=not errs, changed=tuple(changed), errors=tuple(errs))

    def _delete(self, node: NodeRecord, user: str) -> str | None:
        name = node.name
        if node.dynamic_conf is None:
            return (f"cannot delete node {name}: it is defined in {self.book.config.path}; "
                    "remove its NodeName line and reconfigure")
        held = self.jobs_holding([name])
        if held:
            jobs = ",".join(str(jid) for jid, _ in held)
            return f"cannot delete node {name}: it runs job(s) {jobs}; drain it and let them end"
        _, err = self.book.apply_event(node, events.Delete(now=self.wall(), user=user))
        if err:
            return err
        self.book.drop_node(name)
        for kind in ("hb", "suspend", "resume"):
            self.deadlines.cancel((name, kind))
        self.book.leave_partitions(node)
        self.book.mark_changed(node)
        logs.event("dynamic node deleted", node=name, user=user or "-")
        self.eventlog.add("deleted", name, user=user or None)
        return None
