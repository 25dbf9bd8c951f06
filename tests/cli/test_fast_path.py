"""The CLI's fast path: raw frames agree with ranch.protocol.framing, and every view asks the
controller (GetSnapshot.fields) for every node-record key it reads."""

from __future__ import annotations

import json
import socket
import sys
import threading

import pytest
from records import mixed_cluster, snapshot

from ranch.cli import show_records
from ranch.cli.rinfo import build_parser, json_text, reads, table_lines
from ranch.conf.hostlist import fold
from ranch.protocol import client, codec, versions
from ranch.protocol.framing import FrameDecoder, encode_frame
from ranch.protocol.messages import GetSnapshot, Snapshot
from ranch.protocol.rawframe import FrameError, pack_frame

KEY = b"k" * 32


class Strict(dict):
    """A record cut down to the keys a view asked for; reading any other key it had fails."""

    def __init__(self, full: dict, keep: tuple[str, ...]) -> None:
        super().__init__((k, v) for k, v in full.items() if k in keep)
        self.dropped = set(full) - set(keep)

    def __getitem__(self, key: str):
        assert key not in self.dropped, f"view reads {key!r} but did not ask for it"
        return super().__getitem__(key)

    def get(self, key: str, default=None):
        assert key not in self.dropped, f"view reads {key!r} but did not ask for it"
        return super().get(key, default)


def cut(snap, keep: tuple[str, ...]):
    return snapshot([Strict(n, keep) for n in snap.nodes], list(snap.partitions))


VIEWS = [
    [], ["-N"], ["-l"], ["-Nl"], ["-R"], ["-lR"], ["-s"], ["-F", "-a"], ["-r"], ["-d"],
    ["-e", "-o", "%P %a %l %L %s %r %h %g %i %D %t %T %N %n %o %c %C %F %m %e %O %d %f %b %G "
     "%w %z %X %Y %Z %E %u %U %H %v"],
    ["-t", "drain,idle"], ["-n", "n[01-05]"], ["-N", "--metrics"],
]


@pytest.mark.parametrize("argv", VIEWS, ids=" ".join)
def test_table_views_read_only_the_fields_they_ask_for(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    full = mixed_cluster()
    assert table_lines(cut(full, reads(args)), args) == table_lines(full, args)


def test_json_reads_only_its_fields() -> None:
    args = build_parser().parse_args(["--json"])
    full = mixed_cluster()
    assert json_text(cut(full, reads(args)), args, []) == json_text(full, args, [])


def test_show_records_read_only_their_fields() -> None:
    full = mixed_cluster()
    slim = cut(full, show_records.NODE_READS)
    for n, s in zip(full.nodes, slim.nodes, strict=True):
        assert show_records.node_lines(s) == show_records.node_lines(n)
    by_full = {n["name"]: n for n in full.nodes}
    by_slim = {n["name"]: n for n in cut(full, show_records.PARTITION_READS).nodes}
    for p in full.partitions:
        assert show_records.partition_lines(p, by_slim, fold) == show_records.partition_lines(
            p, by_full, fold
        )


def test_raw_version_is_the_current_protocol_version() -> None:
    assert client.RAW_VERSION == versions.CURRENT


def test_raw_frames_are_typed_frames() -> None:
    raw = pack_frame("GetSnapshot", b'{"metrics":true,"fields":["name"]}', KEY,
                     request_id=7, version=versions.CURRENT, now=1000.0)
    dec = FrameDecoder(KEY, clock=lambda: 1000.0)
    dec.feed(raw)
    [frame] = list(dec)
    assert (frame.type, frame.request_id) == ("GetSnapshot", 7)
    assert frame.msg == GetSnapshot(metrics=True, fields=("name",))
    # and the typed encoder's frame differs from the raw one only in its nonce and MACs
    typed = encode_frame(GetSnapshot(metrics=True, fields=("name",)), KEY, request_id=7,
                         now=1000.0)
    nonce_at = 4 + 3 + len("GetSnapshot") + 16
    body_at = nonce_at + 16 + 32  # after the header MAC (protocol version 5 on)
    assert typed[:nonce_at] == raw[:nonce_at]
    assert typed[body_at:-32] == raw[body_at:-32]


class OneShotServer:
    """Answers one request with `reply` (a typed message) or with raw bytes."""

    def __init__(self, reply) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = self.sock.getsockname()
        self.reply = reply
        self.got = None
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            dec = FrameDecoder(KEY, max_size=1 << 20)
            while self.got is None:
                dec.feed(conn.recv(65536))
                for frame in dec:
                    self.got = frame
            reply = self.reply
            data = reply if isinstance(reply, bytes) else encode_frame(
                reply, KEY, request_id=self.got.request_id)
            conn.sendall(data)
        self.sock.close()


def test_request_raw_round_trip_with_a_full_reply() -> None:
    # A controller that ignores `fields` sends whole records: the client takes them as they are.
    snap = mixed_cluster()
    srv = OneShotServer(Snapshot("c", 1.0, tuple(snap.nodes), tuple(snap.partitions)))
    kind, body = client.request_raw(srv.addr, KEY, "GetSnapshot",
                                    {"metrics": False, "fields": ["name", "state"]}, timeout=5)
    srv.thread.join(5)
    assert srv.got.msg == GetSnapshot(fields=("name", "state"))
    assert kind == "Snapshot" and body["nodes"] == json.loads(json.dumps(list(snap.nodes)))


def test_request_raw_refuses_a_reply_signed_with_another_key() -> None:
    srv = OneShotServer(pack_frame("Pong", b"{}", b"x" * 32, request_id=0,
                                   version=versions.CURRENT))
    with pytest.raises(FrameError) as err:
        client.request_raw(srv.addr, KEY, "Ping", {}, timeout=5)
    assert err.value.code == "bad_mac"


def test_request_raw_reads_a_large_body_with_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "ORJSON_ABOVE", 10)
    body = codec.encode(Snapshot("c", 1.0, ({"name": "n1"},), ()))
    srv = OneShotServer(pack_frame("Snapshot", body, KEY, request_id=0,
                                   version=versions.CURRENT))
    assert client.request_raw(srv.addr, KEY, "GetSnapshot", {}, timeout=5)[1]["nodes"] == [
        {"name": "n1"}
    ]


def test_cli_imports_no_attrs_cattrs_or_messages() -> None:
    import subprocess

    code = ("import sys, ranch.cli.rinfo, ranch.cli.rcontrol, ranch.cli.controller, "
            "ranch.cli.sinfo_view, "
            "ranch.cli.show_records, ranch.protocol.client, ranch.protocol.rawframe, "
            "ranch.protocol.auth; "
            "print(sorted(m for m in ('attr', 'cattrs', 'ranch.protocol.messages', 'lark', 'trio') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
