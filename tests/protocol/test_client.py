"""The blocking client against a tiny trio controller on loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from ranch.protocol import messages as m
from ranch.protocol.client import ControllerUnreachable, parse_address
from ranch.protocol.errors import ProtocolError
from ranch.protocol.tcp import FramedStream, PeerClosed
from ranch.protocol.typedclient import request

KEY = b"s" * 32


async def serve_one(stream: trio.SocketStream) -> None:
    """Answer Ping with Pong, anything else with an Error, on the version the peer spoke."""
    fs = FramedStream(stream, KEY)
    try:
        frame = await fs.receive()
    except ProtocolError as exc:
        await fs.send_error(exc)
        return
    except PeerClosed:
        return
    reply = m.Pong("c", "0.1", 1.0) if frame.type == "Ping" else m.Error("bad_request", "no")
    await fs.send(reply, frame.request_id, frame.version)


async def controller(nursery: trio.Nursery) -> tuple[str, int]:
    listeners = await nursery.start(trio.serve_tcp, serve_one, 0)
    return listeners[0].socket.getsockname()[:2]


async def test_request_round_trip_and_error_value(nursery: trio.Nursery) -> None:
    addr = await controller(nursery)
    assert await trio.to_thread.run_sync(request, addr, KEY, m.Ping()) == m.Pong("c", "0.1", 1.0)
    err = await trio.to_thread.run_sync(request, addr, KEY, m.GetConfig())
    assert err == m.Error("bad_request", "no")


async def test_wrong_key_reply_refused(nursery: trio.Nursery) -> None:
    addr = await controller(nursery)
    with pytest.raises(ProtocolError) as info:
        await trio.to_thread.run_sync(request, addr, b"w" * 32, m.Ping())
    assert info.value.code == "bad_mac"


def test_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        with pytest.raises(ControllerUnreachable) as info:
            request(("127.0.0.1", port), KEY, m.Ping(), timeout=2)
    assert isinstance(info.value, ConnectionError)
    assert f"127.0.0.1:{port}" in str(info.value)


def test_silent_controller_times_out() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(ControllerUnreachable, match=r"no reply within 0\.2 s"):
            request(s.getsockname(), KEY, m.Ping(), timeout=0.2)


@pytest.mark.parametrize(
    ("text", "addr"),
    [("h", ("h", 6817)), ("h:1", ("h", 1)), ("[::1]:9", ("::1", 9)), ("[::1]", ("::1", 6817))],
)
def test_parse_address(text: str, addr: tuple[str, int]) -> None:
    assert parse_address(text) == addr


@pytest.mark.parametrize("text", ["", ":5", "h:x", "h:70000", "[::1"])
def test_parse_address_errors(text: str) -> None:
    with pytest.raises(ValueError):
        parse_address(text)


def test_client_import_is_trio_free() -> None:
    code = "import sys, ranch.protocol.client; sys.exit('trio' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=root, check=False).returncode == 0
