"""What a job used, as rctld keeps it (issue 48): a step's figures merged over its nodes, and the
job's and its steps' per-node reports through the state file's JSON."""

from __future__ import annotations

from ranch.ctld.jobs.steprecord import Step, step_from_json, step_json, step_record
from ranch.ctld.jobs.usagerecord import gpus_used, merged, node_usage
from ranch.protocol.usage import GpuUse, Usage


def test_a_steps_figures_over_its_nodes() -> None:
    a = node_usage(Usage(1.5, 0.25, 2, 1000, 3, 1500, 5000, 2, 9000, 0.5, 2, source="proc"))
    b = node_usage(Usage(2.0, 0.5, 1, 4000, 7, 4000, 3000, 7, 3000, 2.5, 7, gpus=(
        GpuUse(1, 50.0, 90.0, 100, 200, 3),)))
    got = merged({"n2": b, "n1": a})
    assert got is not None
    assert (got["user_s"], got["system_s"], got["tasks"]) == (3.5, 0.75, 3)
    assert (got["max_rss_kib"], got["max_rss_node"], got["max_rss_task"]) == (4000, "n2", 7)
    assert (got["max_vm_kib"], got["max_vm_node"], got["max_vm_task"]) == (5000, "n1", 2)
    assert (got["min_cpu_s"], got["min_cpu_node"], got["min_cpu_task"]) == (0.5, "n1", 2)
    assert (got["rss_kib"], got["vm_kib"]) == (5500, 12000)
    assert gpus_used({"n1": a, "n2": b}) == [{"node": "n2", "index": 1, "util_ave": 50.0,
                                             "util_max": 90.0, "mem_max_mib": 100,
                                             "mem_total_mib": 200, "samples": 3}]
    assert merged({}) is None


def test_a_steps_reports_survive_the_state_file() -> None:
    step = Step(0, "x", "u", 1, ("n1",), ((0,),), (1,), True, 10.0, 0)
    assert "usage" not in step_json(step) and step_record(step)["usage"] is None
    step.usage["n1"] = node_usage(Usage(1.0, 0.5, 1, 10, 0, 10, 20, 0, 20))
    again = step_from_json(step_json(step))
    assert again.usage == step.usage
    assert step_record(again)["usage"]["max_rss_node"] == "n1"
