"""Who may give a negative nice: every administrator (root, SlurmUser, AdminUsers), decided by the
permission gate with the other rights; before, the job checks refused an AdminUsers member."""

from __future__ import annotations

from ranch.ctld.rpc.permissions import Identity, nice_refusal
from ranch.protocol import messages as m


def _job(nice: int) -> m.SubmitJob:
    return m.SubmitJob(script="#!/bin/sh\ntrue\n", user="alice", uid=1000, gid=1000,
                       workdir="/home/a", time_limit=10, nice=nice)


def test_an_admin_who_is_not_root_may_give_a_negative_nice() -> None:
    assert nice_refusal(Identity(1000, 1000, "alice", True), _job(-5)) is None


def test_a_user_may_not_and_is_told_which_field() -> None:
    refused = nice_refusal(Identity(1000, 1000, "alice", False), _job(-5))
    assert refused is not None and refused.field == "nice"
    assert "Invalid --nice value" in refused.message


def test_a_positive_nice_is_everyone_s() -> None:
    assert nice_refusal(Identity(1000, 1000, "alice", False), _job(10)) is None
