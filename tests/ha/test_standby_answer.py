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
from ranch.ctld import standby
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
