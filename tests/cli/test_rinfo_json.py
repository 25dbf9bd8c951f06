"""rinfo --json: sinfo --json's document shape, from hand-built snapshots."""

from __future__ import annotations

import json

from records import mixed_cluster

from ranch.cli.rinfo import build_parser, json_text


def doc(*argv: str) -> dict:
    args = build_parser().parse_args(["--json", *argv])
    return json.loads(json_text(mixed_cluster(), args, ["--json", *argv]))


def test_document_shape() -> None:
    d = doc()
    assert set(d) == {"sinfo", "meta", "errors", "warnings"}
    assert d["errors"] == [] and d["warnings"] == []
    assert d["meta"]["slurm"]["cluster"] == "test"
    assert d["meta"]["command"] == ["rinfo", "--json"]
    entry = d["sinfo"][0]
    for key in ("port", "node", "nodes", "cpus", "sockets", "cores", "threads", "disk", "memory",
                "weight", "features", "gres", "reason", "reservation", "partition"):
        assert key in entry
    assert entry["partition"]["maximums"]["time"] == {"set": True, "infinite": False, "number": 60}


def test_states_are_arrays_and_groups_follow_state() -> None:
    d = doc()
    states = {(e["partition"]["name"], tuple(e["node"]["state"])): e for e in d["sinfo"]}
    idle = states[("debug", ("IDLE",))]
    assert idle["nodes"]["nodes"] == ["n01", "n02"] and idle["nodes"]["idle"] == 2
    assert states[("debug", ("IDLE", "DRAIN"))]["reason"]["description"] == "bad fan"
    assert states[("debug", ("DOWN", "NOT_RESPONDING"))]["nodes"]["other"] == 1
    assert states[("debug", ("MIXED", "DRAIN"))]["cpus"] | {} == states[
        ("debug", ("MIXED", "DRAIN"))
    ]["cpus"]
    mix = states[("debug", ("MIXED",))]["cpus"]
    assert (mix["allocated"], mix["idle"], mix["other"], mix["total"]) == (3, 5, 0, 8)
    assert ("gpu", ("FUTURE",)) not in states  # FUTURE hidden like the text views
    assert ("secret", ("IDLE",)) not in states
    assert ("gpu", ("FUTURE",)) in {
        (e["partition"]["name"], tuple(e["node"]["state"])) for e in doc("-F")["sinfo"]
    }


def test_filters_apply() -> None:
    d = doc("-p", "gpu", "-t", "fail")
    assert [e["nodes"]["nodes"] for e in d["sinfo"]] == [["n08"]]
