"""NodeName and DownNodes lines: golden records, DEFAULT accumulation, Slurm's validation rules."""

import pytest

from ranch.conf.build import parse_config_text
from ranch.conf.model import Gres, NodeConfig

from .helpers import errors_of, one_error


def test_single_node_line_golden() -> None:
    cfg = parse_config_text(
        "NodeName=n1 NodeHostname=host1 NodeAddr=10.0.0.1 Port=7000 Boards=1 Sockets=2 "
        "CoresPerSocket=8 ThreadsPerCore=2 RealMemory=64000 TmpDisk=1000 "
        'Gres=gpu:a100:2,nic:1 Features=a,b Weight=5 State=DRAIN Reason="new disk" CpuBind=cores\n')
    assert cfg.nodes == (NodeConfig(
        name="n1", hostname="host1", addr="10.0.0.1", port=7000, cpus=32, boards=1, sockets=2,
        cores_per_socket=8, threads_per_core=2, real_memory=64000, tmp_disk=1000,
        gres=(Gres("gpu", "a100", 2), Gres("nic", None, 1)), features=("a", "b"), weight=5,
        state="DRAIN", reason="new disk", options=(("CpuBind", "cores"),)),)
    assert cfg.nodes[0].gpus == 2
    assert cfg.nodes[0].gres_str == "gpu:a100:2,nic:1"


def test_defaults_of_a_bare_node() -> None:
    (n,) = parse_config_text("NodeName=lonely\n").nodes
    assert (n.hostname, n.addr, n.port, n.cpus, n.real_memory, n.tmp_disk, n.weight, n.state,
            n.gres, n.features) == ("lonely", "lonely", None, 1, 1, 0, 1, "UNKNOWN", (), ())


def test_ranged_line_expands_with_addresses_in_order() -> None:
    cfg = parse_config_text("NodeName=gpu[01-03] NodeAddr=10.0.0.[7-9] CPUs=4\n")
    assert [(n.name, n.hostname, n.addr, n.cpus) for n in cfg.nodes] == [
        ("gpu01", "gpu01", "10.0.0.7", 4), ("gpu02", "gpu02", "10.0.0.8", 4),
        ("gpu03", "gpu03", "10.0.0.9", 4)]
    assert cfg.node("gpu02") is cfg.nodes[1]
    assert cfg.node("nope") is None


def test_addr_defaults_to_hostname() -> None:
    cfg = parse_config_text("NodeName=a[1-2] NodeHostname=h[1-2]\n")
    assert [(n.hostname, n.addr) for n in cfg.nodes] == [("h1", "h1"), ("h2", "h2")]


def test_default_lines_accumulate_and_never_reset() -> None:
    cfg = parse_config_text(
        "NodeName=DEFAULT CPUs=8 RealMemory=1000\n"
        "NodeName=a\n"
        "NodeName=DEFAULT RealMemory=2000 Features=x\n"  # CPUs=8 stays
        "NodeName=b Weight=3\n"
        "nodename=default gres=gpu:2\n"
        "NodeName=c Features=y\n")
    got = {n.name: (n.cpus, n.real_memory, n.features, n.weight, n.gpus) for n in cfg.nodes}
    assert got == {"a": (8, 1000, (), 1, 0), "b": (8, 2000, ("x",), 3, 0),
                   "c": (8, 2000, ("y",), 1, 2)}


def test_keys_are_case_insensitive_but_names_are_not() -> None:
    cfg = parse_config_text("nodename=Node1 cpus=2 REALMEMORY=5 state=future\n")
    (n,) = cfg.nodes
    assert (n.name, n.cpus, n.real_memory, n.state) == ("Node1", 2, 5, "FUTURE")


@pytest.mark.parametrize(
    ("line", "cpus", "sockets", "cores", "threads"),
    [
        ("CPUs=2", 2, 2, 1, 1),  # sockets inferred from CPUs
        ("Sockets=2 CoresPerSocket=4 ThreadsPerCore=2", 16, 2, 4, 2),
        ("Boards=2 SocketsPerBoard=2 CoresPerSocket=4", 16, 4, 4, 1),
        ("CPUs=8 Sockets=2 CoresPerSocket=4 ThreadsPerCore=2", 8, 2, 4, 2),  # cores only
        ("CPUs=16 CoresPerSocket=4 ThreadsPerCore=2", 16, 2, 4, 2),
        ("Procs=4", 4, 4, 1, 1),
    ],
)
def test_cpu_topology(line: str, cpus: int, sockets: int, cores: int, threads: int) -> None:
    (n,) = parse_config_text(f"NodeName=x {line}\n").nodes
    assert (n.cpus, n.sockets, n.cores_per_socket, n.threads_per_core) == (
        cpus, sockets, cores, threads)


def test_cpus_that_match_no_product_warn_and_reset() -> None:
    # slurmctld 22.05: "NodeNames=x CPUs=12 match no Sockets, Sockets*CoresPerSocket or
    # Sockets*CoresPerSocket*ThreadsPerCore. Resetting CPUs." and it runs with 16.
    cfg = parse_config_text("NodeName=x CPUs=12 Sockets=2 CoresPerSocket=4 ThreadsPerCore=2\n")
    assert cfg.nodes[0].cpus == 16
    (w,) = cfg.warnings
    assert (w.line, w.col, w.severity) == (1, 17, "warning")
    assert "CPUs=12" in w.message and "reset to 16" in w.message


def test_cpus_equal_to_sockets_is_accepted() -> None:
    (n,) = parse_config_text("NodeName=x CPUs=2 Sockets=2 CoresPerSocket=2 "
                             "ThreadsPerCore=2\n").nodes
    assert n.cpus == 2


@pytest.mark.parametrize(
    ("line", "cpus"),
    [
        # Slurm reads CPUs wherever it is on the line, Procs only without it.
        ("CPUs=80 Sockets=2 CoresPerSocket=20 ThreadsPerCore=2 Procs=40", 80),
        ("Procs=40 CPUs=80 Sockets=2 CoresPerSocket=20 ThreadsPerCore=2", 80),
        ("CPUs=2 CoresPerSocket=2 ThreadsPerCore=1 Procs=1", 2),
        ("Procs=1 CPUs=2 CoresPerSocket=2 ThreadsPerCore=1", 2),
        ("Procs=6", 6),
    ],
)
def test_cpus_beats_procs_wherever_it_is(line: str, cpus: int) -> None:
    cfg = parse_config_text(f"NodeName=x {line}\n")
    assert cfg.nodes[0].cpus == cpus
    assert cfg.warnings == ()


def test_cpus_of_a_default_line_beats_procs() -> None:
    # Checked against slurmctld 22.05: DEFAULT CPUs=8 then Procs=2 gives CPUTot=8.
    cfg = parse_config_text("NodeName=DEFAULT CPUs=8\nNodeName=a Procs=2\n")
    assert cfg.nodes[0].cpus == 8


def test_sockets_and_sockets_per_board_on_one_line() -> None:
    # slurmctld 22.05 logs that both are given and goes on with SocketsPerBoard.
    cfg = parse_config_text("NodeName=x Sockets=2 SocketsPerBoard=3 CoresPerSocket=2\n")
    assert (cfg.nodes[0].sockets, cfg.nodes[0].cpus) == (3, 6)
    (w,) = cfg.warnings
    assert "mutually exclusive" in w.message and "SocketsPerBoard used" in w.message


def test_one_hostname_and_address_for_many_nodes() -> None:
    # slurmctld 22.05 accepts one NodeHostname/NodeAddr for a whole NodeName line.
    cfg = parse_config_text("NodeName=n[1-3] NodeHostname=a1 NodeAddr=10.0.0.9\n")
    assert [(n.hostname, n.addr) for n in cfg.nodes] == [("a1", "10.0.0.9")] * 3


def test_state_idle_starts_unknown_with_a_warning() -> None:
    # slurmctld 22.05 starts with State=IDLE; Ranch's nodes start UNKNOWN until they register.
    cfg = parse_config_text("NodeName=DEFAULT State=IDLE\nNodeName=x\n")
    assert cfg.nodes[0].state == "UNKNOWN"
    (w,) = cfg.warnings
    assert (w.line, w.col) == (1, 24) and "State=IDLE" in w.message


def test_line_value_wins_over_inherited_sockets_form() -> None:
    (n,) = parse_config_text("NodeName=DEFAULT SocketsPerBoard=4\nNodeName=x Sockets=2\n").nodes
    assert n.sockets == 2


@pytest.mark.parametrize(
    ("line", "col", "needle"),
    [
        ("NodeName=x CPUs=two", 17, "not a whole number"),
        ("NodeName=x RealMemory=-5", 23, "out of range"),
        ("NodeName=x Port=70000", 17, "out of range"),
        ("NodeName=x State=ON", 18, "valid values: CLOUD DOWN DRAIN"),
        ("NodeName=x Gres=gpu:2,:3", 23, "bad Gres"),
    ],
)
def test_bad_values_point_at_the_value(line: str, col: int, needle: str) -> None:
    e = one_error(line + "\n")
    assert (e.line, e.col) == (1, col)
    assert needle in e.message


def test_gres_with_several_types_loads_as_slurmctld_reads_it() -> None:
    # slurmctld 22.05 starts with these and shows Gres=gpu:a:2,gpu:b:2 / gpu:a:1,gpu:b:1,gpu:c:1
    (n,) = parse_config_text("NodeName=x Gres=gpu:a:b:2\n").nodes
    assert [(g.name, g.type, g.count) for g in n.gres] == [("gpu", "a", 2), ("gpu", "b", 2)]
    (n,) = parse_config_text("NodeName=x Gres=gpu:a:b:c\n").nodes
    assert [(g.type, g.count) for g in n.gres] == [("a", 1), ("b", 1), ("c", 1)]


def test_node_on_two_lines() -> None:
    e = one_error("NodeName=a[1-4]\nNodeName=a[3-5] CPUs=1\n", path="site.conf")
    assert (e.path, e.line, e.col) == ("site.conf", 2, 10)
    assert "a3, a4 already defined" in e.message and "site.conf:1" in e.message


def test_node_twice_in_one_expression() -> None:
    e = one_error("NodeName=a[1-2],a2\n")
    assert "a2 already defined" in e.message


def test_nodename_all_is_reserved() -> None:
    e = one_error("NodeName=ALL CPUs=2\n")
    assert (e.col, "reserved" in e.message) == (10, True)


def test_addr_count_must_match() -> None:
    e = one_error("NodeName=n[1-3] NodeAddr=10.0.0.[1-2]\n")
    assert (e.line, e.col) == (1, 26)
    assert "NodeAddr names 2 host(s) but NodeName names 3" in e.message


def test_bad_hostlist_points_inside_the_value() -> None:
    e = one_error("NodeName=n[5-2] CPUs=1\n")
    # column of the offending range inside the value, not of the value's start
    assert e.line == 1 and e.col > 10
    assert e.source_line == "NodeName=n[5-2] CPUs=1"


def test_all_errors_of_a_file_are_reported() -> None:
    errs = errors_of("NodeName=a CPUs=x\nNodeName=b Weight=y\nNodeName=c State=ON\n")
    assert [(e.line, e.col) for e in errs] == [(1, 17), (2, 19), (3, 18)]


def test_unknown_node_key_warns_with_suggestion() -> None:
    cfg = parse_config_text("NodeName=a RealMemroy=10\n")
    (w,) = cfg.warnings
    assert (w.severity, w.line, w.col) == ("warning", 1, 12)
    assert "did you mean 'RealMemory'" in w.message
    assert "RealMemory" not in dict(cfg.nodes[0].options)


def test_unknown_node_key_is_error_when_strict() -> None:
    e = one_error("NodeName=a RealMemroy=10\n", strict=True)
    assert "did you mean 'RealMemory'" in e.message


def test_repeated_key_on_a_line_warns_last_wins() -> None:
    cfg = parse_config_text("NodeName=a CPUs=2 CPUs=4\n")
    assert cfg.nodes[0].cpus == 4
    assert "more than once" in cfg.warnings[0].message


def test_downnodes_sets_state_and_reason() -> None:
    cfg = parse_config_text(
        "NodeName=n[1-4]\n"
        'DownNodes=n[2-3] State=DRAIN Reason="fan failure"\n'
        "DownNodes=n4\n")
    assert [(n.name, n.state, n.reason) for n in cfg.nodes] == [
        ("n1", "UNKNOWN", None), ("n2", "DRAIN", "fan failure"), ("n3", "DRAIN", "fan failure"),
        ("n4", "DOWN", None)]


def test_downnodes_of_undefined_node() -> None:
    e = one_error("NodeName=n1\nDownNodes=n[1-2] State=DOWN\n")
    assert (e.line, e.col) == (2, 11) and "n2" in e.message


def test_downnodes_bad_state() -> None:
    e = one_error("NodeName=n1\nDownNodes=n1 State=IDLE\n")
    assert (e.line, e.col) == (2, 20)


@pytest.mark.parametrize(
    ("value", "col", "needle"),
    [("n[0-70000]", 12, "65,536"), ("ab[9-3]", 13, "low bound above"),
     ("x[1-2]y[a]", 18, "not a number")],
)
def test_hostlist_errors_in_nodename(value: str, col: int, needle: str) -> None:
    e = one_error(f"NodeName={value}\n")
    assert (e.line, e.col) == (1, col)
    assert e.message.startswith("NodeName: bad hostlist: ") and needle in e.message


def test_alias_spellings_override_defaults() -> None:
    cfg = parse_config_text("NodeName=DEFAULT Features=x Procs=8\nNodeName=a Feature=y Procs=2\n")
    assert (cfg.nodes[0].features, cfg.nodes[0].cpus) == (("y",), 2)


@pytest.mark.parametrize(
    "node_line",
    [
        "NodeName=x[1-2] NodeAddr=a,b,c",  # count mismatch
        "NodeName=x[1-2] NodeHostname=h[1-",  # bad hostlist in NodeHostname
    ],
)
def test_rejected_node_line_adds_no_follow_on_errors(node_line: str) -> None:
    errs = errors_of(f"NodeName=y1\n{node_line}\nPartitionName=p Nodes=x[1-2],y1\n"
                     "PartitionName=q Nodes=x1\n")
    assert len(errs) == 1, [e.format() for e in errs]
    assert errs[0].line == 2 and "not defined" not in errs[0].message


def test_undefined_node_still_errors_beside_a_rejected_line() -> None:
    errs = errors_of("NodeName=x[1-2] NodeAddr=a,b,c\nPartitionName=p Nodes=x1,z9\n")
    assert [e.line for e in errs] == [1, 2]
    assert "z9 not defined" in errs[1].message and "x1" not in errs[1].message
