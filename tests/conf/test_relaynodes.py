"""RelayNodes= (issue 47): the nodes whose rnoded relays the others; each a configured node,
named once, a bad value refused with its file, line and column (what rctld serves of it:
tests/ctld/test_relays.py)."""

from __future__ import annotations

from ranch.conf.build import parse_config_text
from tests.conf.helpers import errors_of, one_error

BASE = """ClusterName=t
SlurmctldHost=c1
NodeName=r[1-2] NodeAddr=10.0.0.1 Port=7001 CPUs=1
NodeName=r3 CPUs=1
NodeName=n[001-100] CPUs=1
PartitionName=p Nodes=ALL Default=YES
"""


def test_relays_named_and_served() -> None:
    cfg = parse_config_text(BASE + "RelayNodes=r[1-3]\n", path="/etc/ranch/cluster.conf")
    assert cfg.relays == ("r1", "r2", "r3")


def test_without_the_key_nothing_is_relayed() -> None:
    cfg = parse_config_text(BASE)
    assert cfg.relays == ()


def test_an_unknown_node_is_refused_where_it_is_written() -> None:
    err = one_error(BASE + "RelayNodes=r1,zz9\n", path="/etc/ranch/cluster.conf")
    assert (err.line, err.col) == (7, 15), err.format()
    assert "RelayNodes: zz9 is not a node of this config" in err.format()
    assert err.format().startswith("/etc/ranch/cluster.conf:7:15: ")


def test_a_relay_named_twice_and_a_bad_hostlist_are_refused() -> None:
    errs = errors_of(BASE + "RelayNodes=r1,r[1-2]\n")
    assert [e.message for e in errs] == ["RelayNodes: r1 is named twice"]
    assert errs[0].col == 15
    bad = one_error(BASE + "RelayNodes=r[2-1]\n")
    assert "RelayNodes: bad hostlist" in bad.message and bad.line == 7
