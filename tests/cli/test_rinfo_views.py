"""rinfo's text views against hand-built snapshots: layout, grouping, filters, formats."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from records import T0, mixed_cluster, node, part, snapshot

from ranch.cli.controller import CliError
from ranch.cli.rinfo import build_parser, table_lines
from ranch.cli.sinfo_format import FormatError, parse_format
from ranch.conf.hostlist import fold


def F(*names: str) -> str:
    """NODELIST of `names`: folding is ranch.conf.hostlist's (tested there); grouping is ours."""
    return fold(list(names))


def view(*argv: str, snap=None) -> list[str]:
    return table_lines(snap or mixed_cluster(), build_parser().parse_args(list(argv)))


def test_default_view_is_sinfo_layout() -> None:
    assert view() == [
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST",
        "debug*       up    1:00:00      1  down* n07",
        "debug*       up    1:00:00      1   drng n06",
        "debug*       up    1:00:00      1  drain n05",
        "debug*       up    1:00:00      1    mix n04",
        "debug*       up    1:00:00      1  alloc n03",
        "debug*       up    1:00:00      2   idle " + F("n01", "n02"),
        "gpu          up 2-00:30:00      1   fail n08",
        "gpu          up 2-00:30:00      1  idle~ n09",
        "gpu          up 2-00:30:00      1  down* n07",
        "empty        up   infinite      0    n/a ",
    ]


def test_future_and_hidden_shown_on_request() -> None:
    rows = view("-F", "-a", "-h")
    assert "gpu          up 2-00:30:00      1   futr n10" in rows
    assert "secret       up   infinite      1   idle n11" in rows
    assert not any(r.startswith("PARTITION") for r in rows)
    assert not any("futr" in r or "secret" in r for r in view())


def test_partition_column_widens_to_longest_name() -> None:
    snap = snapshot([node("a1", parts=("averyverylongname",))], [part("averyverylongname", ["a1"])])
    assert view(snap=snap)[:2] == [
        "PARTITION         AVAIL  TIMELIMIT  NODES  STATE NODELIST",
        "averyverylongname    up   infinite      1   idle a1",
    ]


def test_node_oriented_one_line_per_node_and_partition() -> None:
    rows = view("-N")
    assert rows[0] == "NODELIST  NODES PARTITION STATE "
    assert rows[1] == "n01           1 debug*    idle  "
    assert [r.split()[0] for r in rows[1:]] == [
        "n01", "n02", "n03", "n04", "n05", "n06", "n07", "n07", "n08", "n09"
    ]
    assert rows[7].split() == ["n07", "1", "debug*", "down*"]
    assert rows[8].split() == ["n07", "1", "gpu", "down*"]


def test_node_long_view() -> None:
    rows = view("-Nl")
    assert rows[0] == (
        "NODELIST  NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE "
        "REASON              "
    )
    assert rows[5].split() == [
        "n05", "1", "debug*", "drained", "8", "2:2:2", "16000", "1000", "1", "(null)", "bad", "fan"
    ]


def test_long_view_has_timestamp_only_in_output(capsys) -> None:
    rows = view("-l")
    assert rows[0].split() == [
        "PARTITION", "AVAIL", "TIMELIMIT", "JOB_SIZE", "ROOT", "OVERSUBS", "GROUPS", "NODES",
        "STATE", "NODELIST"
    ]  # as sinfo 22.05 -l: no RESERVATION column
    assert rows[2].split() == [
        "debug*", "up", "1:00:00", "1-infinite", "no", "NO", "all", "1", "draining", "n06"
    ]


def test_reasons_view_groups_by_reason_user_time() -> None:
    assert view("-R") == [
        "REASON               USER      TIMESTAMP           NODELIST",
        "bad fan              alice     2026-09-21T14:13:20 " + F("n05", "n06"),
        "Not responding       root      2026-09-21T14:13:20 n07",
        "psu                  bob       2026-09-21T14:13:20 n08",
    ]


def with_uid(name: str) -> str:
    """sinfo -lR's USER: name(uid) when the name is a user of this machine, else the name."""
    import pwd

    try:
        return f"{name}({pwd.getpwnam(name).pw_uid})"
    except KeyError:
        return name


def test_reasons_long_view_adds_state_and_uid() -> None:
    rows = view("-lR")
    alice = f"{with_uid('alice'):<13}"  # another test may have made an alice on this machine
    assert rows[0] == "REASON               USER         TIMESTAMP           STATE  NODELIST"
    assert rows[1].startswith(f"bad fan              {alice}2026-09-21T14:13:20 drain  n05")
    assert rows[2].startswith(f"bad fan              {alice}2026-09-21T14:13:20 drng   n06")
    assert rows[3].startswith("Not responding       root(0)      ")


def test_reason_cut_to_twenty_characters() -> None:
    snap = snapshot(
        [node("n01", "IDLE", ("DRAIN",), compact="drain", reason="x" * 30)], [part("p", ["n01"])]
    )
    assert view("-R", "-h", snap=snap) == ["x" * 20 + " alice     2026-09-21T14:13:20 n01"]


def test_summary_counts_allocated_idle_other() -> None:
    assert view("-s") == [
        "PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST",
        "debug*       up    1:00:00          3/2/2/7 n[01-07]",
        "gpu          up 2-00:30:00          0/1/2/3 n[07-09]",
        "empty        up   infinite          0/0/0/0 ",
    ]


def test_filters_partition_nodes_states() -> None:
    assert view("-p", "gpu", "-h") == [
        "gpu          up 2-00:30:00      1   fail n08",
        "gpu          up 2-00:30:00      1  idle~ n09",
        "gpu          up 2-00:30:00      1  down* n07",
    ]
    assert view("-n", "n[01-03]", "-h", "-o", "%N %t") == [F("n01", "n02") + " idle", "n03 alloc"]
    assert view("-t", "drain", "-h", "-o", "%N") == [F("n05", "n06")]  # drained + draining
    assert view("-t", "idle~", "-h", "-o", "%N") == ["n09"]
    assert view("-t", "~down", "-p", "gpu", "-h", "-o", "%N") == [F("n08", "n09")]
    assert view("-d", "-h", "-o", "%N") == ["n07"]
    assert "n07" not in " ".join(view("-r", "-o", "%N"))


def test_bad_state_and_hostlist_are_errors() -> None:
    with pytest.raises(CliError) as err:
        view("-t", "sleepy")
    assert err.value.code == 1 and "sleepy" in err.value.message  # sinfo -t bogus exits 1
    with pytest.raises(CliError) as err:
        view("-n", "n[3-1]")
    assert err.value.code == 1


def test_format_fields_and_grouping_without_exact() -> None:
    snap = snapshot(
        [
            node("a1", parts=("p",), cpus=8, real_memory=1000, cpu_load=0.5, free_mem=10),
            node("a2", parts=("p",), cpus=16, real_memory=2000, cpu_load=1.25, free_mem=30,
                 gres="gpu:4", features=["ib"]),
            node("a3", parts=("p",), cpus=16, real_memory=2000, cpu_load=1.0, free_mem=20,
                 gres="gpu:4", features=["ib"]),
        ],
        [part("p", ["a1", "a2", "a3"])],
    )
    assert view("-h", "-o", "%P|%c|%m|%O|%e|%D|%N", snap=snap) == [
        "p|8+|1000+|0.50-1.25|10-30|3|a[1-3]"
    ]
    # gres and features group nodes even without -e
    assert view("-h", "-o", "%G %f %D %N", snap=snap) == [
        "(null) (null) 1 a1",
        "gpu:4 ib 2 " + F("a2", "a3"),
    ]
    # -e splits on every configuration number printed
    assert view("-e", "-h", "-o", "%c %N", snap=snap) == ["8 a1", "16 " + F("a2", "a3")]


def test_cpu_counts_and_widths() -> None:
    rows = view("-h", "-o", "%10R|%.12C|%z|%w|%a|%l|%E", "-n", "n[01-04]")
    # alloc 8 + mix 3 allocated; 5 + 16 idle on the mixed and idle nodes
    assert rows == ["debug     |  11/21/0/32|2:2:2|1|up|1:00:00|none"]


def test_right_align_and_cut() -> None:
    assert view("-h", "-o", "%.3t|%4N", "-n", "n03") == ["all|n03 "]


def test_literal_text_and_percent() -> None:
    assert view("-h", "-o", "<%N> 100%% %t", "-n", "n04") == ["<n04> 100% mix"]


def test_parse_format_rejects_unknown_letter() -> None:
    with pytest.raises(FormatError, match="%Q"):
        parse_format("%P %Q", frozenset("P"))



def test_unknown_letter_is_printed_as_written(capsys) -> None:
    # sinfo 22.05 warns and prints the run as it is (and has no `-` flag), exit 0
    assert view("-h", "-o", "%P %Q|%-6t", "-n", "n04") == ["debug* %Q|%-6t"]
    assert capsys.readouterr().err.splitlines() == ["Invalid node format specification: Q",
                                                    "Invalid node format specification: -"]


def test_nodes_outside_partitions_show_as_na() -> None:
    snap = snapshot([node("x1", parts=())], [])
    assert view("-h", snap=snap) == ["n/a         n/a        n/a      1   idle x1"]


def test_metrics_columns() -> None:
    hot = node(
        "g01",
        parts=("p",),
        metrics={
            "cpu_pct": 12.5, "mem_used_mib": 500, "mem_total_mib": 1000, "max_temp_c": 55.0,
            "gpus": [
                {"index": 0, "util_pct": 80.0, "mem_used_mib": 10, "mem_total_mib": 40,
                 "temp_c": 71.0, "power_w": 300.0},
                {"index": 1, "util_pct": 40.0, "mem_used_mib": 30, "mem_total_mib": 40,
                 "temp_c": 60.0, "power_w": 250.0},
            ],
            "heartbeat_age_s": 3.2,
        },
        health={"verdict": "ok", "message": "", "warnings": ["gpu0 at 71C"]},
    )
    cold = node("g02", parts=("p",))
    rows = view("-N", "--metrics", snap=snapshot([hot, cold], [part("p", ["g01", "g02"])]))
    assert rows[0].split() == [
        "NODELIST", "NODES", "PARTITION", "STATE", "CPU%", "MEM%", "GPU_UTIL", "GPU_MEM",
        "MAX_TEMP", "HB_AGE", "HEALTH"
    ]
    assert rows[1].split() == [
        "g01", "1", "p", "idle", "12.5", "50.0", "60.0", "50.0", "71C", "3s", "gpu0", "at", "71C"
    ]
    assert rows[2].split() == ["g02", "1", "p", "idle", "-", "-", "-", "-", "-", "-", "ok"]


def test_reason_time_missing_is_unknown() -> None:
    n = node("n01", "DOWN", compact="down", reason="gone", when=0)
    assert view("-R", "-h", snap=snapshot([n], [part("p", ["n01"])])) == [
        "gone                 alice     Unknown             n01"
    ]
    assert T0  # the records module's fixed time is what the other tests print


@given(st.text(alphabet=st.sampled_from("ab-01\u0663\u00e9"), max_size=10))
def test_natural_key_is_the_regular_expressions(name: str) -> None:
    import re

    from ranch.cli.node_records import natural_key

    parts: list = re.split(r"(\d+)", name)
    parts[1::2] = map(int, parts[1::2])
    assert natural_key(name) == tuple(parts)


def test_long_format_names_widths_and_unknown_names(capsys) -> None:
    # sinfo -O: 20 wide and left-justified by default, `:[.]N[suffix]`, no space between
    # fields; a name it cannot show is dropped with sinfo's warning (measured on 22.05)
    rows = view("-O", "Partition,Available,NodeList:10,CPUs:.5,StateCompact", "-n", "n04")
    assert rows == ["PARTITION           AVAIL               NODELIST   CPUSSTATE               ",
                    "debug*              up                  n04           8mix                 "]
    assert view("-O", "partition:5|x,bogus", "-n", "n04") == ["PARTI|x", "debug|x"]
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "Invalid job format specification: bogus")
