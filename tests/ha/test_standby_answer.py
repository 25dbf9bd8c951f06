"""A standby's answer to a user's MUNGE-authenticated request (issue 32), on real TCP with a
real munged: "not the controller; the controller is NAME" in words, signed with the session key
the credential carries, as the serving controller signs its replies; a ping is answered; and a
standby whose cluster does not run auth/munge says so instead of closing the connection."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator

import pytest
import trio

from ranch.conf.model import AccessSettings
from ranch.ctld.pair import standby
from ranch.protocol.client import request_raw
from ranch.protocol.rawframe import FrameError
from tests.integration.cluster import REPO
from tests.munged import Munged

KEY = b"k" * 32


@pytest.fixture(scope="module")
def munged() -> Iterator[Munged]:
    with Munged() as md:
        yield md


async def _standby(nursery: trio.Nursery, access: AccessSettings) -> int:
    listeners = await nursery.start(functools.partial(
        standby.serve, "127.0.0.1", 0, KEY, lambda: "c1", "test", "0", access))
    return listeners[0].socket.getsockname()[1]


async def _ask(port: int, type_name: str, socket: str) -> tuple[str, dict]:
    return await trio.to_thread.run_sync(lambda: request_raw(
        ("127.0.0.1", port), b"", type_name, {}, timeout=10, munge=socket))


async def test_a_munge_user_is_told_who_the_controller_is(nursery: trio.Nursery,
                                                          munged: Munged) -> None:
    access = AccessSettings(auth_type="auth/munge", auth_info=(("socket", munged.socket),))
    port = await _standby(nursery, access)
    kind, doc = await _ask(port, "GetSnapshot", munged.socket)
    assert (kind, doc.get("code"), doc.get("message")) == (
        "Error", "standby", "not the controller; the controller is c1")
    kind, doc = await _ask(port, "Ping", munged.socket)
    assert kind == "Pong" and doc["cluster_name"] == "test"
    # a command run by a user who cannot read the cluster key signs with munged, and says it
    env = {**os.environ, "PYTHONPATH": str(REPO), "RANCH_KEY_FILE": "/nonexistent/ranch.key",
           "RANCH_MUNGE_SOCKET": munged.socket}
    env.pop("RANCH_CONF", None)
    done = await trio.run_process(
        [sys.executable, "-m", "ranch.cli.rqueue", "--server", f"127.0.0.1:{port}"],
        env=env, capture_stdout=True, capture_stderr=True, check=False)
    err = done.stderr.decode()
    assert done.returncode == 1 and "not the controller; the controller is c1" in err, err


async def test_a_standby_without_munge_refuses_the_credential_in_words(
        nursery: trio.Nursery, munged: Munged) -> None:
    port = await _standby(nursery, AccessSettings())
    with pytest.raises(FrameError, match="does not accept MUNGE credentials") as got:
        await _ask(port, "GetSnapshot", munged.socket)
    assert got.value.code == "auth"


async def test_an_allocation_holder_speaks_to_the_new_controller(nursery: trio.Nursery,
                                                                 tmp_path) -> None:
    """rrun's "alive" words for its own allocation (cli/alive.py) that reach a standby, or a
    controller that is gone, go to the next SlurmctldHost: after a takeover the new controller
    hears the holder before InactiveLimit ends the allocation."""
    from ranch.cli.alive import Alive
    from ranch.cli.controller import Target
    from ranch.protocol import messages as m
    from ranch.protocol.tcp import FramedStream

    heard: list[m.JobControl] = []

    async def leader(stream: trio.SocketStream) -> None:
        fs = FramedStream(stream, KEY)
        frame = await fs.receive()
        heard.append(frame.msg)
        await fs.send(m.JobResult(ok=True, job_ids=frame.msg.job_ids), frame.request_id,
                      frame.version)
        await fs.aclose()

    listeners = await nursery.start(functools.partial(trio.serve_tcp, leader, 0,
                                                      host="127.0.0.1"))
    lead = listeners[0].socket.getsockname()[1]
    port = await _standby(nursery, AccessSettings())
    with trio.socket.socket() as gone:  # a port nothing listens on: the old controller's
        await gone.bind(("127.0.0.1", 0))
        dead = gone.getsockname()[1]
    key = tmp_path / "key"
    key.write_bytes(KEY)
    key.chmod(0o600)
    target = Target("127.0.0.1", dead, str(key), "test", controllers=(
        ("c0", "127.0.0.1", dead), ("c2", "127.0.0.1", port), ("c1", "127.0.0.1", lead)))
    alive = Alive(target, 7)
    await trio.to_thread.run_sync(alive.first)
    assert alive.heard and alive.addr == ("127.0.0.1", lead)
    assert [(w.action, w.job_ids) for w in heard] == [("alive", (7,))]
    await trio.to_thread.run_sync(alive.send)  # the words that follow go there at once
    await trio.to_thread.run_sync(alive.receive)
    assert alive.heard and len(heard) == 2
