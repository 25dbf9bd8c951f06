"""Per-user rate limits (SlurmctldParameters=rl_enable, Slurm 23.02's rate_limit.c): the token
buckets on trio's clock, and a flood from one user refused at the controller's door while
another user, root and the cluster key's holders pass."""

from __future__ import annotations

import trio
import trio.testing

import ranch.cli.controller as controller
from ranch.conf.ratelimit import RateLimitSettings, rate_limit_settings
from ranch.ctld.compose.layers import rpc_server
from ranch.ctld.rpc.permissions import Identity
from ranch.ctld.rpc.ratelimit import BACKOFF, BACKOFF_TEXT, Buckets
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster
from tests.ctld.helpers import make_config, wall

CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
SlurmctldParameters={params}
NodeName=n[1-2] CPUs=4 RealMemory=1000
PartitionName=main Nodes=n[1-2] Default=YES
"""
ALICE = Identity(1001, 1001, "alice", False)
BOB = Identity(1002, 1002, "bob", False)
ROOT = Identity(0, 0, "root", True)


class _Conn:
    def __init__(self, who: Identity | None) -> None:
        self.who, self.peer, self.node, self.key = who, "127.0.0.1:9", None, None


def test_settings_default_as_slurm_and_bad_values_keep_the_default() -> None:
    s, warnings = rate_limit_settings("enable_configless,rl_enable")
    assert s == RateLimitSettings(True, 8192, 30, 2, 1) and not warnings
    s, _ = rate_limit_settings("rl_bucket_size=5, rl_refill_rate=3,rl_refill_period=2,"
                               "rl_table_size=16")
    assert s == RateLimitSettings(False, 16, 5, 3, 2)  # rl_* alone does not enable it
    s, warnings = rate_limit_settings("rl_enable,rl_bucket_size=0,rl_refill_rate=x")
    assert (s.bucket_size, s.refill_rate) == (30, 2) and len(warnings) == 2


async def test_a_bucket_empties_and_refills_per_whole_period(autojump_clock) -> None:
    b = Buckets(RateLimitSettings(True, 8, bucket_size=3, refill_rate=2, refill_period=2))
    t0 = trio.current_time()
    assert [b.take(7, t0) for _ in range(4)] == [True, True, True, False]
    await trio.sleep(2 - (t0 % 2) - 0.001)  # still inside the same period: nothing back
    assert not b.take(7, trio.current_time())
    await trio.sleep(0.002)  # the next period: refill_rate tokens
    now = trio.current_time()
    assert [b.take(7, now) for _ in range(3)] == [True, True, False]
    await trio.sleep(100)  # a long silence fills the bucket, never past bucket_size
    now = trio.current_time()
    assert [b.take(7, now) for _ in range(4)] == [True, True, True, False]
    assert b.refused == 4


def test_the_table_is_bounded_and_a_user_past_it_is_not_limited() -> None:
    b = Buckets(RateLimitSettings(True, table_size=2, bucket_size=1))
    assert b.take(1, 0.0) and b.take(2, 0.0) and not b.take(1, 0.0)
    assert all(b.take(3, 0.0) for _ in range(50))  # as Slurm: untracked, unlimited
    assert len(b.table) == 2


def _server(params: str):  # -> Server
    async def reconfigure(who: str) -> m.ReconfigureResult:
        return m.ReconfigureResult(ok=True)

    cfg = make_config(text=CONF.format(params=params))
    return rpc_server(Cluster(cfg, wall=wall).controller, b"k" * 32, reconfigure=reconfigure)


async def test_a_flood_from_one_user_is_refused_while_others_pass(autojump_clock) -> None:
    s = _server("rl_enable,rl_bucket_size=10,rl_refill_rate=5,rl_refill_period=1")
    alice, bob = _Conn(ALICE), _Conn(BOB)
    await trio.sleep(1 - trio.current_time() % 1 + 0.01)  # at the start of a period
    # the Credential opening each connection costs no token: the requests do
    replies = []
    for _ in range(25):
        assert (await s.dispatcher.dispatch(alice, m.Credential("cred")))[0] is None
        replies.append((await s.dispatcher.dispatch(alice, m.GetJobs()))[0])
    refused = [r for r in replies if isinstance(r, m.Error)]
    assert len(refused) == 15
    assert all(r.code == BACKOFF and r.message == BACKOFF_TEXT for r in refused)
    # a submission too is refused (the limit is on requests, not reads)
    submit = m.SubmitJob("true", "alice", 1001, 1001, "/tmp")
    reply, confirms = await s.dispatcher.dispatch(alice, submit)
    assert isinstance(reply, m.Error) and reply.code == BACKOFF and not confirms
    # bob, root and the key's holders (rnoded, root's commands) are not held up by alice
    for conn in (bob, _Conn(ROOT), _Conn(None)):
        reply, _ = await s.dispatcher.dispatch(conn, m.GetJobs())
        assert not isinstance(reply, m.Error)
    for _ in range(40):
        assert not isinstance((await s.dispatcher.dispatch(_Conn(ROOT), m.Ping()))[0], m.Error)
    await trio.sleep(1)  # a period later, refill_rate requests more
    replies = [(await s.dispatcher.dispatch(alice, m.GetJobs()))[0] for _ in range(6)]
    assert [isinstance(r, m.Error) for r in replies] == [False] * 5 + [True]


async def test_without_rl_enable_nobody_is_limited() -> None:
    s = _server("rl_bucket_size=1")
    for _ in range(50):
        assert not isinstance((await s.dispatcher.dispatch(_Conn(ALICE), m.GetJobs()))[0], m.Error)


def test_commands_back_off_and_retry_as_slurms(monkeypatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(controller.time, "sleep", slept.append)
    answers = [("Error", {"code": BACKOFF, "message": BACKOFF_TEXT})] * 3 + [("JobList", {})]
    got = controller._backing_off(controller.time.monotonic() + 60, lambda: answers.pop(0))
    assert got == ("JobList", {}) and slept == [1, 2, 3]
    # out of time: the refusal itself comes back (the command says it)
    answers = [("Error", {"code": BACKOFF, "message": BACKOFF_TEXT})] * 4
    slept.clear()
    got = controller._backing_off(controller.time.monotonic() + 2.5, lambda: answers.pop(0))
    assert got[1]["code"] == BACKOFF and slept == [1, 2] and len(answers) == 1
