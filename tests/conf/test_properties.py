"""Properties of the parser and builder on generated configs (hostlist properties live with it)."""

import tomllib

from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.conf.build import parse_config_text
from ranch.conf.dump import to_toml
from ranch.conf.hostlist import expand

_word = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6)
_group = st.tuples(
    st.integers(1, 30),  # how many nodes
    st.integers(1, 64),  # cpus
    st.integers(1, 10**6),  # memory
    st.lists(_word, max_size=3, unique=True),  # features
    st.sampled_from(["UNKNOWN", "DOWN", "DRAIN", "FUTURE", "CLOUD"]),
    st.booleans(),  # written with continuation and odd spacing
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_group, min_size=1, max_size=6))
def test_generated_node_lines_round_trip(groups: list) -> None:
    lines = ["NodeName=DEFAULT Weight=7"]
    expected = []
    for i, (count, cpus, mem, feats, state, fancy) in enumerate(groups):
        prefix = f"g{i}n"
        expr = f"{prefix}[1-{count}]" if count > 1 else f"{prefix}1"
        feat = f" Features={','.join(feats)}" if feats else ""
        sep = " \\\n\t  " if fancy else "   "
        lines.append(f"nodename={expr}{sep}CPUs={cpus} RealMemory={mem}{feat} State={state}"
                     f"  # group {i}")
        expected += [(f"{prefix}{k}", cpus, mem, tuple(feats), state, 7)
                     for k in range(1, count + 1)]
    lines.append("PartitionName=all Nodes=ALL")
    cfg = parse_config_text("\n".join(lines) + "\n")
    got = [(n.name, n.cpus, n.real_memory, n.features, n.state, n.weight) for n in cfg.nodes]
    assert got == expected
    assert cfg.partitions[0].nodes == tuple(e[0] for e in expected)
    doc = tomllib.loads(to_toml(cfg))
    assert sorted(n for g in doc["node_groups"] for n in expand(g["nodes"])) == sorted(
        e[0] for e in expected)


_reason = st.text(st.characters(codec="ascii", exclude_characters='"\n\r\\'), max_size=30)


@settings(max_examples=60, deadline=None)
@given(_reason)
def test_quoted_reason_survives_verbatim(reason: str) -> None:
    cfg = parse_config_text(f'NodeName=n1\nDownNodes=n1 State=DRAIN Reason="{reason}"\n')
    assert cfg.nodes[0].reason == reason


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["SlurmdTimeout", "slurmdtimeout", "SLURMDTIMEOUT"]),
                min_size=1, max_size=4), st.data())
def test_repeated_keys_last_value_wins(keys: list[str], data: st.DataObject) -> None:
    values = [data.draw(st.integers(0, 65533)) for _ in keys]
    cfg = parse_config_text("".join(f"{k}={v}\n" for k, v in zip(keys, values, strict=True)))
    assert cfg.timeouts.slurmd_timeout == values[-1]
    assert len(cfg.warnings) == len(keys) - 1
