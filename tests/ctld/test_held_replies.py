"""Replies held for the journal, over real TCP: frames a node sends at once are all handled,
one journal write covers them, and their replies leave in order, each after its change is on
disk (a node sending beats back to back waits for one write, not one write per beat)."""

from __future__ import annotations

import trio

from ranch.ctld.daemon import Daemon
from ranch.protocol import messages as m
from ranch.protocol.framing import encode_frame
from ranch.protocol.tcp import FramedStream

from .helpers import hardware, job, make_config

KEY = b"k" * 32
METRICS = m.Metrics(cpu_pct=1.0, load_1m=0.0, memory_used_mib=10, memory_total_mib=1000)


async def receive_until(fs: FramedStream, kind: type, count: int = 1) -> list:
    got = []
    with trio.fail_after(10):
        while len(got) < count:
            frame = await fs.receive()
            if isinstance(frame.msg, kind):
                got.append(frame)
            elif isinstance(frame.msg, m.ConfigPush):
                await fs.send(m.Ack(), frame.request_id)
    return got


def ended_in_journal(d: Daemon) -> set[int]:
    return {r["job"]["id"] for r in d.store.read()
            if "job" in r and r["job"].get("state") == "COMPLETED"}


async def test_beats_sent_at_once_share_a_write_and_are_answered_in_order(tmp_path) -> None:
    d = Daemon(make_config(), KEY, state_dir=str(tmp_path), host="127.0.0.1", port=0,
               save_in_thread=False)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(d.run)
        port = listeners[0].socket.getsockname()[1]
        fs = FramedStream(await trio.open_tcp_stream("127.0.0.1", port), KEY)
        await fs.send(m.Register("n1", hardware(cpus=4), 1.0, "0.1.0"), 1)
        [reg] = await receive_until(fs, m.RegisterReply)
        assert reg.msg.accepted, reg.msg
        ids = [(await d.durability.submit(job(nodelist="n1"))).job_id for _ in range(4)]
        launches = await receive_until(fs, m.LaunchJob, 4)
        for frame in launches:
            await fs.send(m.Ack(), frame.request_id)
        assert sorted(f.msg.job.job_id for f in launches) == ids

        # Four beats back to back (one TCP write), each with one ending, before any reply.
        writes = d.store.writes
        beats = b"".join(
            encode_frame(m.Heartbeat("n1", seq, METRICS,
                                     jobs_ended=(m.JobEnd(jid, "COMPLETED", restarts=0),)),
                         KEY, request_id=100 + seq)
            for seq, jid in enumerate(ids, start=1))
        await fs.stream.send_all(beats)
        replies = await receive_until(fs, m.HeartbeatReply, 4)
        assert [f.request_id for f in replies] == [101, 102, 103, 104]  # in order
        assert ended_in_journal(d) == set(ids)  # on disk before the first reply left
        assert d.store.writes - writes == 1  # one write for them all
        assert {d.controller.jobs.store.jobs[j].state for j in ids} == {"COMPLETED"}
        nursery.cancel_scope.cancel()
