"""A relay that forges (tests/ha/test_relay_net.py): it holds the cluster key, as any relay rnoded
does, connects to rctld over the lab's network and sends, for nodes that are up behind the real
relay, frames their keys never signed: a registration and a heartbeat it signs itself, and an
admin's request inside a node's item. It prints, as JSON, which nodes rctld then told it to
close (`gone`) and any frame it got back that it could read with the cluster key.

    python -m tests.ha.relayforger HOST:PORT KEYFILE NODE_REGISTER NODE_BEAT NODE_ADMIN
"""

from __future__ import annotations

import json
import socket
import sys
import time

from ranch.protocol import messages as m
from ranch.protocol.auth import load_key
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import FrameDecoder, encode_frame


def _hardware() -> m.Hardware:
    return m.Hardware(cpus=2, boards=1, sockets=1, cores_per_socket=2, threads_per_core=1,
                      real_memory_mib=64, tmp_disk_mib=0, gpus=())


def main() -> None:
    host, port = sys.argv[1].rsplit(":", 1)
    key = load_key(sys.argv[2])
    reg, beat, admin = sys.argv[3:6]
    metrics = m.Metrics(cpu_pct=0.0, load_1m=0.0, memory_used_mib=1, memory_total_mib=64)
    forged = {  # each signed with the cluster key: the only key a relay holds
        reg: m.Register(reg, _hardware(), time.time(), "0.1.0"),
        beat: m.Heartbeat(beat, 1, metrics),
        admin: m.UpdateNodes(admin, "DOWN", "the relay says so", "root"),
    }
    items = tuple(m.RelayItem(node, encode_frame(msg, key, request_id=i + 10))
                  for i, (node, msg) in enumerate(forged.items()))
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(encode_frame(m.RelayUp("forger", items, time.time()), key, request_id=1))
    decoder, gone, readable = FrameDecoder(key), set(), []
    deadline = time.monotonic() + 10
    while gone != set(forged) and time.monotonic() < deadline:
        data = sock.recv(1 << 16)
        if not data:
            break
        decoder.feed(data)
        for frame in decoder:
            for item in getattr(frame.msg, "items", ()):
                if item.gone:
                    gone.add(item.node)
                elif item.frame:  # a reply to a node is signed with its key, not ours
                    inner = FrameDecoder(key)
                    inner.feed(item.frame)
                    try:
                        readable.append(type(inner.next_frame().msg).__name__)
                    except ProtocolError:
                        pass
    sock.close()
    print(json.dumps({"gone": sorted(gone), "readable": readable}))


if __name__ == "__main__":
    main()
