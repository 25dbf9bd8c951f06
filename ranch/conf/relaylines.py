"""RelayNodes (issue 47): the nodes whose rnoded relays other nodes' traffic to rctld."""

from __future__ import annotations

from ranch.conf.powerlines import PowerLines
from ranch.conf.values import split_top


class RelayLines(PowerLines):
    """RelayNodes=<hostlist>: each must be a configured node, named once."""

    def relay_nodes(self) -> tuple[str, ...]:
        got = self.globals.get("RelayNodes")
        if got is None:
            return ()
        _, p, src = got
        out: list[str] = []
        offset = 0
        for part in split_top(p.value):
            item = part.strip()
            lead = len(part) - len(part.lstrip())
            col = p.vcol + offset + lead
            names = self.expand_at(src, p, item, offset + lead) if item else []
            if not item:
                self.error(src, p.vline, col, "RelayNodes: empty entry")
            for name in names or ():
                if name not in self.node_where:
                    self.error(src, p.vline, col,
                               f"RelayNodes: {name} is not a node of this config (a relay is "
                               "a configured node whose rnoded serves others)")
                elif name in out:
                    self.error(src, p.vline, col, f"RelayNodes: {name} is named twice")
                else:
                    out.append(name)
            offset += len(part) + 1
        return tuple(out)
