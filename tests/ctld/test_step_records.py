"""A step's record survives the state file (every field, rrun's host included), and the job
history keeps a bounded number of a job's steps."""

from __future__ import annotations

from ranch.ctld.jobs import acct
from ranch.ctld.jobs.steprecord import Step, step_from_json, step_json


def test_a_step_round_trips_through_the_state_file() -> None:
    s = Step(3, "sleep", "alice", 1000, ("n1", "n2"), ((0, 1), (2,)), (2, 1), True, 10.5, 1,
             state="FAILED", awaiting={"n2"}, outcome="FAILED", exit_code=3, signal=9,
             end_time=20.0, host="login1")
    back = step_from_json(step_json(s))
    assert step_json(back) == step_json(s)
    assert back.host == "login1" and back.end_time == 20.0 and back.awaiting == {"n2"}


def test_the_history_keeps_the_first_and_last_steps_of_a_long_job() -> None:
    class Store:
        class c:
            class config:
                cluster_name = "x"

        @staticmethod
        def record(job):
            return {"job_id": 1, "state": "COMPLETED",
                    "steps": [{"id": i} for i in range(acct.STEPS_KEPT + 7)]}

    rec = acct.record_of(Store.record, Store.c.config.cluster_name, object())  # type: ignore[arg-type]
    ids = [s["id"] for s in rec["steps"]]
    half = acct.STEPS_KEPT // 2
    assert len(ids) == acct.STEPS_KEPT and ids[:half] == list(range(half))
    assert ids[-1] == acct.STEPS_KEPT + 6 and rec["steps_left_out"] == 7
