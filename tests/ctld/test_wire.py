"""Prebuilt snapshot frames decode with ranch.protocol.framing exactly like normally encoded
ones, and queued jobs leave the cached one alone."""

from __future__ import annotations

import pytest

from ranch.ctld.rpc.wire import encode_body_frame
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import FrameDecoder
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, register, wall

KEY = b"k" * 32


async def test_prebuilt_snapshot_frame_decodes() -> None:
    cluster = Cluster(make_config(), wall=wall)
    register(cluster, "n1")
    body = cluster.snapshot_body()
    assert cluster.snapshot_body() is body  # encoded once per generation
    for version in (2, 3, 4, 5):
        dec = FrameDecoder(KEY)
        dec.feed(encode_body_frame("Snapshot", body, KEY, request_id=7, version=version))
        frame = dec.next_frame()
        assert (frame.type, frame.request_id, frame.version) == ("Snapshot", 7, version)
        assert frame.msg == cluster.snapshot()
    bad = FrameDecoder(b"x" * 32)
    bad.feed(encode_body_frame("Snapshot", body, KEY, request_id=1, version=3))
    with pytest.raises(ProtocolError) as info:
        bad.next_frame()
    assert info.value.code == "bad_mac"


async def test_a_replaced_snapshot_keeps_no_bodies() -> None:
    """Bodies of an older generation are never served again: they go when it is replaced
    (at 10,000 nodes each field selection's body is 1-5 MB)."""
    cluster = Cluster(make_config(), wall=wall)
    register(cluster, "n1")
    old = cluster.snapshot_body(fields=("name", "compact"))
    cluster.snapshot_body()
    assert len(cluster.views._bodies) == 2
    register(cluster, "n2")  # a state change: a new generation
    new = cluster.snapshot_body()
    assert new != old and list(cluster.views._bodies) == [(False, ())]
    assert b'"n2"' in new


async def test_the_queue_does_not_reach_rinfos_answer() -> None:
    """Queued jobs change no node: rinfo's encoded answer stays the one cached before them, so
    its cost on the controller is a lookup whatever the queue's size (issue 50)."""
    cluster = Cluster(make_config(), wall=wall)
    for name in ("n1", "n2", "n3", "n4"):
        register(cluster, name)
    rinfo_reads = ("compact", "complete", "name", "partitions", "state")  # rinfo's default view
    body = cluster.snapshot_body(fields=rinfo_reads)
    for _ in range(500):
        reply = cluster.jobs.submission.submit(m.SubmitJob(
            "#!/bin/sh\ntrue\n", "u", 1000, 1000, "/tmp", hold=True))
        assert isinstance(reply, m.SubmitReply), reply
    assert len(cluster.jobs.store.jobs) == 500
    assert cluster.snapshot_body(fields=rinfo_reads) is body
