"""A command whose request went to a controller that then stays silent (a leader cut off the
network: the connection was taken, no reply ever comes) gives it up after the config's
MessageTimeout when another controller is listed, as Slurm's commands do, not after its own
longer timeout (rcancel's 30 s): a loop of commands would otherwise wait that long to reach the
new leader (tests/ha/test_failover.py's cut-off leader). With one controller it waits its own."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ranch.cli.controller import Unreachable, find_target, request
from ranch.protocol.auth import create_key
from tests.deadline import scaled


@pytest.fixture
def silent() -> Iterator[int]:
    """A port whose listener never accepts: the kernel completes the connection and takes the
    request, and no reply comes."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _conf(tmp_path: Path, port: int, hosts: str, message_timeout: str) -> dict[str, str]:
    create_key(str(tmp_path / "ranch.key"))
    path = tmp_path / "cluster.conf"
    path.write_text(f"ClusterName=c\n{hosts}SlurmctldPort={port}\nAuthKeyFile=ranch.key\n"
                    f"MessageTimeout={message_timeout}\nNodeName=n1 CPUs=1\n")
    return {"RANCH_CONF": str(path)}


def test_a_silent_controller_of_a_pair_is_given_up_after_message_timeout(
        tmp_path: Path, silent: int) -> None:
    # c2 on 127.0.0.2: nothing listens there, but the request already went to c1 and may have
    # been done, so it is not sent again: the command fails, after MessageTimeout
    env = _conf(tmp_path, silent, "SlurmctldHost=c1(127.0.0.1)\nSlurmctldHost=c2(127.0.0.2)\n",
                "1")
    target = find_target(None, None, None, env)
    assert target.message_timeout == 1.0
    began = time.monotonic()
    with pytest.raises(Unreachable, match=r"127\.0\.0\.1.*no reply within 1 s"):
        request(target, "Ping", want="Pong", timeout=30.0)
    assert time.monotonic() - began < scaled(5.0)


def test_a_lone_controller_is_waited_on_for_the_commands_own_timeout(
        tmp_path: Path, silent: int) -> None:
    env = _conf(tmp_path, silent, "SlurmctldHost=c1(127.0.0.1)\n", "1")
    began = time.monotonic()
    with pytest.raises(Unreachable, match="no reply within 2 s"):
        request(find_target(None, None, None, env), "Ping", want="Pong", timeout=2.0)
    assert time.monotonic() - began >= 1.9  # nothing else to try: MessageTimeout cuts nothing


@pytest.mark.parametrize("text", ["0", "x", "-3"])
def test_a_bad_message_timeout_is_left_to_the_daemons(tmp_path: Path, text: str) -> None:
    env = _conf(tmp_path, 6817, "SlurmctldHost=c1\n", text)
    assert find_target(None, None, None, env).message_timeout is None
