"""A real rctld with HttpListen set, real rnoded, and the CLI, for the HTTP tests."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.integration.cluster import Cluster, free_port, wait_for

TOKEN = "s3cret-token-of-alice-0123456789"
OTHER_TOKEN = "another-token-for-bob-9876543210"
USER_TOKEN = "a-token-for-carol-who-is-no-admin"  # not in AdminUsers

CONF = """\
ClusterName=web
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=30
MessageTimeout=3
ReturnToService=1
HttpListen=127.0.0.1:{http_port}
HttpTokenFile=tokens
AdminUsers=alice,bob
{extra}
NodeName=n[1-3] CPUs=1 RealMemory=64 Gres=gpu:2
NodeName=n4 CPUs=1 RealMemory=64
PartitionName=main Nodes=n[1-4] Default=YES
PartitionName=gpu Nodes=n[1-3]
"""


def http_cluster(workdir: Path, *, extra: str = "", token_mode: int = 0o600) -> Cluster:
    """A Cluster (not started) whose rctld serves HTTP; `c.http` is its base URL."""
    port, http_port = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    tokens = workdir / "tokens"
    tokens.write_text(f"# name:token\nalice:{TOKEN}\nbob:{OTHER_TOKEN}\n"
                      f"carol:{USER_TOKEN}\n")
    os.chmod(tokens, token_mode)
    c = Cluster(workdir, nodes=["n1", "n2", "n3", "n4"],
                conf_text=CONF.format(port=port, http_port=http_port, extra=extra))
    c.port, c.addr = port, ("127.0.0.1", port)
    c.http = f"http://127.0.0.1:{http_port}"  # type: ignore[attr-defined]
    return c


GPUS = {"n1": 2, "n2": 2, "n3": 2}  # fake GPUs, as the NodeName lines say


def start(c: Cluster) -> None:
    c.start_ctld()
    wait_for(lambda: _http_up(c.http), what="rctld's HTTP server")  # type: ignore[attr-defined]
    for name in c.node_names:
        c.start_node(name, fake_gpus=GPUS.get(name, 0))
    c.wait_for(lambda: all(c.state(n) == "IDLE" for n in c.node_names), 20,
               what="every node IDLE")


def _http_up(base: str) -> bool:
    try:
        return httpx.get(base + "/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def cli(c: Cluster, module: str, *args: str) -> str:
    proc = c.run_cli(module, *args)
    assert proc.returncode == 0, f"{module} {args}: rc {proc.returncode}\n{proc.stderr}"
    return proc.stdout
