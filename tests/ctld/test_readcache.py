"""Listings answered from a recent body (SlurmctldParameters=read_cache_ms, issue 47): polls cost
one build per interval, and a reply is never older than the staleness it states."""

from __future__ import annotations

import random

import orjson
import trio
import trio.testing

from ranch.conf.ratelimit import read_cache_ms
from ranch.ctld.compose.layers import rpc_server
from ranch.ctld.rpc.readcache import with_age
from ranch.ctld.rpc.wire import Prebuilt
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster
from tests.ctld.helpers import make_config, wall

CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
{extra}
NodeName=n[1-2] CPUs=4 RealMemory=1000
PartitionName=main Nodes=n[1-2] Default=YES
"""


def _server(extra: str):  # -> Server
    async def reconfigure(who: str) -> m.ReconfigureResult:
        return m.ReconfigureResult(ok=True)

    cfg = make_config(text=CONF.format(extra=extra))
    return rpc_server(Cluster(cfg, wall=wall).controller, b"k" * 32, reconfigure=reconfigure)


def _submit() -> m.SubmitJob:
    return m.SubmitJob("sleep 1000", "alice", 1001, 1001, "/tmp")


def test_settings_and_the_stated_age() -> None:
    assert read_cache_ms((("SlurmctldParameters", "rl_enable,read_cache_ms=250"),)) == 250
    assert read_cache_ms((("SlurmctldParameters", "read_cache_ms=x"),)) == 0
    assert read_cache_ms(()) == 0
    body = with_age(b'{"generated_at":1.0,"jobs":[]}', 0.25)
    assert orjson.loads(body) == {"state_age": 0.25, "generated_at": 1.0, "jobs": []}


async def test_off_by_default_a_submitted_job_is_listed_at_once(autojump_clock) -> None:
    s = _server("")
    for _ in range(3):
        reply, _ = await s.dispatcher.dispatch(_Key(), _submit())
        body = orjson.loads((await s.dispatcher.dispatch(_Key(), m.GetJobs()))[0].body)
        assert reply.job_id in {j["job_id"] for j in body["jobs"]}
        assert "state_age" not in body
    assert s.dispatcher.read_cache.built == s.dispatcher.read_cache.served == 0


class _Key:
    """The cluster key's holder (root's commands): no user identity, no rate limit."""

    who, peer, node, key = None, "127.0.0.1:9", None, None


async def test_a_reply_is_never_older_than_it_says(autojump_clock) -> None:
    """Submissions and polls interleaved at random instants over 20 s: every job whose
    submission was answered before (reply time - stated age) is in the listing, the stated
    age never passes the interval, and most polls are answered without a build."""
    s = _server("SlurmctldParameters=read_cache_ms=300")
    rng = random.Random(47)
    submitted: list[tuple[float, int]] = []
    missing_seen = 0
    polls = 0
    fields = ("job_id", "state", "user")
    end = trio.current_time() + 20
    while trio.current_time() < end:
        await trio.sleep(rng.uniform(0.0, 0.12))
        if rng.random() < 0.3:
            reply, _ = await s.dispatcher.dispatch(_Key(), _submit())
            submitted.append((trio.current_time(), reply.job_id))
            continue
        msg = m.GetJobs(fields=fields) if rng.random() < 0.5 else m.GetJobs()
        reply, _ = await s.dispatcher.dispatch(_Key(), msg)
        assert isinstance(reply, Prebuilt)
        got_at = trio.current_time()
        body = orjson.loads(reply.body)
        age = body["state_age"]
        assert 0 <= age < 0.3
        listed = {j["job_id"] for j in body["jobs"]}
        state_at = got_at - age
        for t, jid in submitted:
            if t <= state_at:
                assert jid in listed, (jid, t, got_at, age)
            elif jid not in listed:
                missing_seen += 1  # newer than the state the reply states: may be absent
        polls += 1
    # not a vacuous run: stale replies happened, and the cache spared most builds
    assert missing_seen > 0 and len(submitted) > 30
    assert s.dispatcher.read_cache.served > s.dispatcher.read_cache.built
    assert s.dispatcher.read_cache.built + s.dispatcher.read_cache.served == polls
