"""A node that never registered is `unk*` (UNKNOWN+NOT_RESPONDING) for rinfo and for /metrics
alike, as in Slurm, where only a node that answered once is set DOWN for not responding; a node
that was up and went silent is `down*`. The demo used to show the one as `unk*` in rinfo and
count it `slurm_nodes_down` in /metrics."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.web.http_cluster import GPUS, cli, http_cluster, start


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_never_registered_node_is_unknown_in_rinfo_and_metrics(tmp_path: Path) -> None:
    c = http_cluster(tmp_path, extra="SlurmdTimeout=3")  # the last value of a key wins
    c.node_names = ["n1", "n2", "n3"]  # n4 is configured, and never started
    with c:
        start(c)
        assert GPUS["n3"] and c.state("n4").startswith("UNKNOWN")
        c.kill_node("n3")
        # n4's SlurmdTimeout ran from rctld's start, so it has run out by the time n3's has.
        c.wait_for(lambda: c.state("n3") == "DOWN+NOT_RESPONDING", 60, what="n3 down*")
        assert c.state("n4") == "UNKNOWN+NOT_RESPONDING"

        listing = cli(c, "ranch.cli.rinfo", "-N", "-h", "-p", "main", "-o", "%N %t %T")
        assert listing.splitlines() == ["n1 idle idle", "n2 idle idle", "n3 down* down*",
                                        "n4 unk* unknown*"], listing

        got = _samples(httpx.get(c.http + "/metrics", timeout=10).text)  # type: ignore[attr-defined]

        def count(key: str) -> float:
            return got[(f"slurm_nodes_{key}", ())]

        # Slurm's own families (statistics.c): one base state each, flags counted apart.
        assert (count("down"), count("unknown"), count("noresp"), count("idle")) == (1, 1, 2, 2)
        # prometheus-slurm-exporter buckets sinfo's state by its prefix; `unknown*` has none.
        assert (count("idle_power_save"), count("err")) == (0, 0)
        assert got[("ranch_node_state", (("node", "n4"), ("reason_source", ""),
                                         ("state", "unknown*")))] == 1
        assert got[("slurm_node_cpu_total", (("node", "n4"), ("status", "unknown*")))] == 1
