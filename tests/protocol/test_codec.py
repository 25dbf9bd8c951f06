"""Every message type survives encode/decode; bad bodies are refused naming the field."""

from __future__ import annotations

import attrs
import orjson
import pytest

from ranch.protocol import codec
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.versions import CURRENT, FIELDS_ADDED, downgrade

GPU = m.GpuInfo(0, "NVIDIA H100 80GB HBM3", "GPU-1234", "00000000:17:00.0", 81559, "550.54")
HW = m.Hardware(64, 1, 2, 16, 2, 515_000, 900_000, 2, (GPU,), "Linux 6.8", "x86_64", "gpu01")
HEALTH = m.HealthReport("drain", "HC: disk full", ("gpu0 at 91C",), 1.7e9)
METRICS = m.Metrics(12.5, 3.25, 1000, 515_000, 71.0, (m.GpuMetrics(0, 50.0, 100, 81559, 60, 300),))
SETTINGS = m.NodeSettings("c", 10.0, 300.0, 10.0, "/bin/hc", 60.0, 20.0, ("IDLE", "CYCLE"))
FILES = (m.ConfigFile("cluster.conf", "NodeName=gpu01\n"),)

SAMPLES = [
    m.Register("gpu01", HW, 1.69e9, "0.1.0", "abc", HEALTH),
    m.RegisterReply(True, "", SETTINGS, FILES, "abc", "IDLE+DRAIN"),
    m.RegisterReply(False, "unknown node gpu99"),
    m.Heartbeat("gpu01", 7, METRICS, (1, 2), HEALTH),
    m.HeartbeatReply("IDLE", "abc"),
    m.ConfigPush(SETTINGS, FILES, "abc"),
    m.LaunchJob(m.JobSpec(7, "train", "alice", 1000, 1000, "#!/bin/sh\ntrue\n", "/home/alice",
                          "slurm-%j.out", env=(("PATH", "/bin"),), nodelist="gpu[01-02]",
                          num_nodes=2, gpus=(0, 1), time_limit=3600.0, array_task_id=3)),
    m.KillJob(7, 0, "cancelled"),
    m.KillJob(7, 0, "requeued", 2),
    m.JobStarted(7, 2, 1.7e9),
    m.SubmitJob("#!/bin/sh\ntrue\n", "alice", 1000, 1000, "/home/alice", num_nodes=2,
                gpus=1, env=(("PATH", "/bin"),), time_limit=30, array="1-4"),
    m.SubmitReply(5, (5, 6)),
    m.GetJobs((5,)),
    m.JobList(1.7e9, ({"job_id": 5, "state": "RUNNING"},)),
    m.GetAcct((5,), ((7, 2),), (1000,), ("alice",), ("COMPLETED",), 1.7e9, None, 10),
    m.AcctList(1.7e9, ({"job_id": 5, "state": "COMPLETED"},), 3, ""),
    m.StepRequest(5, ("hostname",), "/tmp", "127.0.0.1", 4242, (("A", "b"),), "h", 3, 3, 1, 2,
                  0, 1, "c[1-3]", False, True, "out-%t", "", "none", True),
    m.StepGranted(5, 0, "c[1-3]", ("c1", "c2", "c3"), ((0,), (1,), (2,)), "ab" * 32),
    m.LaunchStep(m.StepSpec(5, 1, 0, "h", "alice", 1000, 1000, ("hostname",), "/tmp",
                            (("A", "b"),), "c[1-3]", 1, (1, 4), 6, "2(x3)", 1, "127.0.0.1",
                            4242, "ab" * 32, ((0,), (1,)), "", "", "", True, "c[1-3]", "p")),
    m.KillStep(5, 0, 2, 1),
    m.StepEnd(5, 0, "FAILED", 3, 0, 1, 1.7e9, 1.7e9 + 2, ""),
    m.StepHello(5, 0, "c1", (0, 1)),
    m.TaskOutput(1, 2, "caf\xe9\n"),
    m.TaskExit(1, 3, 0),
    m.TaskInput("line\n", True),
    m.StepSignal(2),
    m.OutputAck(((0, 1, 4096), (0, 2, 12))),
    m.CancelJobs((5,), "alice", 1000, 15),
    m.JobControl("hold", (5, 6), "alice", 1000),
    m.JobResult(False, (5,), ("job 6: Job is not held",)),
    m.Heartbeat("gpu01", 8, METRICS, (3,), None,
                (m.JobEnd(7, "COMPLETED", 0, 0, "", 1.7e9, 1.7e9 + 5, 1),)),
    m.HeartbeatReply("ALLOCATED", "abc", (9,)),
    m.ShutdownNotice("gpu01"),
    m.Ack(),
    m.GetSnapshot(metrics=True),
    m.Snapshot("c", 1.7e9, ({"name": "gpu01", "state": {"flags": ["DRAIN"]}},), ({"name": "p"},)),
    m.UpdateNodes("gpu[01-04]", "DRAIN", "broken fan", "root", 0),
    m.RebootNodes("gpu[01-64]", asap=True, next_state="RESUME", reason="new driver", user="root"),
    m.RebootNode(reason="new driver : reboot issued"),
    m.ReservationRequest("create", "maint1", start=1.7e9, duration=60, nodes="gpu[01-04]",
                         flags=("MAINT", "IGNORE_JOBS"), users=("root",), user="root"),
    m.ReservationReply(True, "maint1", reservations=({"name": "maint1", "nodes": "gpu01"},)),
    m.UpdateResult(False, ("gpu01",), ("gpu05: unknown node",)),
    m.NodeMembership("reject", "gpu[01-02]", "not ours", "root"),
    m.GetEvents(since=1.5, nodes="gpu01", limit=10, follow=True),
    m.Events(({"seq": 1, "kind": "approved", "node": "gpu01"},), missed=3),
    m.GetConfig(),
    m.ConfigDump("/etc/cluster.conf", "abc", (("SlurmdTimeout", "300 sec"),)),
    m.Reconfigure("root"),
    m.Takeover("root"),
    m.ReconfigureResult(False, ("a.conf:1:1: bad",), ""),
    m.Ping(),
    m.Pong("c", "0.1.0", 1.7e9),
    m.GetDiag(),
    m.Diag({"bf_cycle_counter": 3, "bf_cycle_last": 1234, "bf_active": False}),
    m.Error("bad_request", "nope", "seq"),
    m.Credential("MUNGE:AwQFAAA=:abc="),
    m.GuardRequest("confirm", "down", "gpu[01-02]", "root"),
    m.GuardStatus(True, ({"guard": "DownGuard", "state": "TRIPPED"},), {"stalls": 1},
                  ("gpu01",), ()),
    m.AcctmgrRequest(("load", "file=tree.cfg"), ("immediate",), "y", False,
                     (("tree.cfg", "Cluster - 'c1'\n"),), (), "alice", 1000),
    m.AcctmgrReply(" Adding Account(s)\n", "", 0, (("tree.cfg", "Cluster - 'c1'\n"),), False),
    m.ShareRequest("alice"),
    m.GetWhy(12, only_uid=1000),
    m.WhySuggestion("--time=50", "a time limit of 50 min: it would start now", 1.7e9, "n1"),
    m.WhyReply(12, "PENDING", "Resources", "Resources: needs 4 node(s)", ("n1: drained",),
               1.7e9, "n[1-4]", "planned by backfill",
               (m.WhySuggestion("--nodes=2", "2 node(s)", 1.7e9, "n[1-2]"),), 1.7e9),
    m.ShareLine(1, "physics", "alice", "", 3, 10, 0.5, 1200.0, 0.25, 0.25, None, 0.75,
                "", "cpu=60,mem=1024"),
    m.ShareReply(True, "c1", (m.ShareLine(0, "root", "", "", 1, -1, 1.0, 0.0, 0.0, 0.0, None,
                                          None),)),
    m.PriorityRequest((3, 4), ("alice",), ("gpu",)),
    m.PriorityWeights(1000, 0, 10000, 100, 1000, 5000, "CPU=1000"),
    m.PriorityRow(3, "gpu", "alice", 0, 12.5, 0.0, 5000.0, 25.0, 1000.0, 2500.0,
                  (("cpu", 250.0),), 0, 0, (("cpu", 0.25),)),
    m.PriorityReply(True, m.PriorityWeights(age=1000), (m.PriorityRow(
        5, "main", "bob", 7, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, (), -10),)),
    m.RelayJoin("gpu001"),
    m.RelayUp("relay01", (m.RelayItem("gpu001", b"\x00\x00\x00\x10frame"),
                          m.RelayItem("gpu002", gone=True))),
    m.RelayDown((m.RelayItem("gpu001", b"\x00\x00\x00\x10reply"),)),
    m.ReconfigureDryRun("/etc/ranch/candidate.conf", "root"),
    m.DryRunRow(7, "alice", "main", 4294901753, 1500, 3, 1),
    m.DryRunStart(7, "n[1-2]", "main"),
    m.ReconfigureDryRunReply(True, (), "/etc/ranch/candidate.conf", "priority/basic",
                             "priority/multifactor",
                             (m.DryRunRow(7, "alice", "main", 1, 2, 2, 1),),
                             (m.DryRunStart(7, "n1", "backfill"),)),
]


def test_samples_cover_every_message_type() -> None:
    assert {type(s).__name__ for s in SAMPLES} == set(m.MESSAGE_TYPES)


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda s: type(s).__name__)
def test_round_trip(msg: object) -> None:
    assert codec.decode(type(msg).__name__, codec.encode(msg)) == msg


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"name": "n", "seq": "x", "metrics": {}}', "seq"),
        (b'{"name": "n", "seq": 1}', "metrics"),
        (
            b'{"name": "n", "seq": 1, "metrics": {"cpu_pct": 1, "load_1m": 1, '
            b'"memory_used_mib": 1, "memory_total_mib": 1, "gpus": [{"index": "a"}]}}',
            "metrics.gpus.0.index",
        ),
    ],
)
def test_bad_field_named(body: bytes, field: str) -> None:
    with pytest.raises(ProtocolError) as info:
        codec.decode("Heartbeat", body)
    assert info.value.code == "bad_request"
    assert info.value.field == field
    assert repr(field) in info.value.message


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b""])
def test_garbage_body(body: bytes) -> None:
    with pytest.raises(ProtocolError, match="bad_request: Heartbeat body"):
        codec.decode("Heartbeat", body)


def test_unknown_type() -> None:
    with pytest.raises(ProtocolError) as info:
        codec.decode("LaunchMissiles", b"{}")
    assert info.value.code == "unknown_type"


def test_fields_added_later_have_defaults() -> None:
    # Additive versioning only works if every newer field can be filled in for an older peer.
    for table in FIELDS_ADDED.values():
        for cls, names in table.items():
            fields = attrs.fields_dict(cls)
            for name in names:
                assert fields[name].default is not attrs.NOTHING, f"{cls.__name__}.{name}"


def test_version_1_register_body_decodes_with_defaults() -> None:
    body = codec.encode(SAMPLES[0], version=1)
    assert b"config_hash" not in body and b"numa_nodes" not in body and b"driver" not in body
    reg = codec.decode("Register", body)
    assert reg.name == "gpu01" and reg.hardware.cpus == 64
    assert reg.config_hash == "" and reg.health is None
    assert reg.hardware.numa_nodes == 1 and reg.hardware.gpus[0].driver == ""


def test_the_start_asked_in_the_launchs_answer_only_of_a_version_6_node() -> None:
    """A version-5 node never sees `started_answer` (it answers Ack, then sends JobStarted); a
    version-6 one from before the field decodes the body, the key ignored, and does the same."""
    launch = attrs.evolve(SAMPLES[6], epoch=3, started_answer=True)
    assert codec.decode("LaunchJob", codec.encode(launch)) == launch
    old = codec.encode(launch, version=5)
    assert b"started_answer" not in old and b'"epoch"' in old
    assert codec.decode("LaunchJob", old) == attrs.evolve(launch, started_answer=False)
    answer = m.JobStarted(7, 2, 1.7e9, answers_launch=True)
    assert b"answers_launch" not in codec.encode(answer, version=5)
    body = orjson.loads(codec.encode(launch))
    body["a_field_from_a_later_rctld"] = 1
    assert codec.decode("LaunchJob", orjson.dumps(body)) == launch


def test_downgrade_current_is_identity() -> None:
    raw = codec.converter.unstructure(SAMPLES[0])
    assert downgrade(raw, m.Register, CURRENT) is raw


_METRICS = b'{"cpu_pct": 1, "load_1m": 1, "memory_used_mib": 1, "memory_total_mib": 1}'
_SETTINGS = (
    b'{"cluster_name": "c", "heartbeat_interval": 1, "slurmd_timeout": 1, "message_timeout": 1,'
    b' "health_check_program": null, "health_check_interval": 1, "health_check_timeout": 1,'
)


@pytest.mark.parametrize(
    ("type_name", "body", "field"),
    [
        ("RegisterReply", b'{"accepted": "false"}', "accepted"),  # bool("false") is True
        ("RegisterReply", b'{"accepted": 1}', "accepted"),
        ("HeartbeatReply", b'{"node_state": null}', "node_state"),  # would become "None"
        ("Heartbeat", b'{"name": {"a": 1}, "seq": 1, "metrics": ' + _METRICS + b"}", "name"),
        ("Heartbeat", b'{"name": "n", "seq": "7", "metrics": ' + _METRICS + b"}", "seq"),
        ("Heartbeat", b'{"name": "n", "seq": 1.9, "metrics": ' + _METRICS + b"}", "seq"),
        ("Heartbeat", b'{"name": "n", "seq": true, "metrics": ' + _METRICS + b"}", "seq"),
        ("Heartbeat", b'{"name": "n", "seq": 1, "job_ids": "12", "metrics": ' + _METRICS + b"}",
         "job_ids"),
        ("Heartbeat", b'{"name": "n", "seq": 1, "job_ids": {"1": 2}, "metrics": ' + _METRICS
         + b"}", "job_ids"),
        ("Heartbeat", b'{"name": "n", "seq": 1, "metrics": {"cpu_pct": "nan", "load_1m": 1, '
         b'"memory_used_mib": 1, "memory_total_mib": 1}}', "metrics.cpu_pct"),
        ("ConfigPush", b'{"settings": ' + _SETTINGS + b' "health_check_node_state": "IDLE"},'
         b' "config_files": [], "config_hash": ""}', "settings.health_check_node_state"),
        ("ConfigDump", b'{"path": "p", "config_hash": "h", "items": [["a"]]}', "items.0"),
        ("ConfigDump", b'{"path": "p", "config_hash": "h", "items": [["a", "b", "c"]]}',
         "items.0"),
        ("Snapshot", b'{"cluster_name": "c", "generated_at": 1, "nodes": [[["a", 1]]], '
         b'"partitions": []}', "nodes.0"),
    ],
)
def test_wrong_types_refused_not_coerced(type_name: str, body: bytes, field: str) -> None:
    with pytest.raises(ProtocolError) as info:
        codec.decode(type_name, body)
    assert info.value.code == "bad_request"
    assert info.value.field == field


def test_deep_nesting_and_huge_numbers_are_protocol_errors() -> None:
    deep = b'{"cluster_name": "c", "generated_at": 1, "nodes": [' + b"[" * 5000 + b"]" * 5000
    for type_name, body in (
        ("Snapshot", deep + b'], "partitions": []}'),
        ("Heartbeat", b'{"name": "n", "seq": 1e999, "metrics": ' + _METRICS + b"}"),
        ("Heartbeat", b'{"name": "n", "seq": 99999999999999999999999, "metrics": ' + _METRICS
         + b"}"),
    ):
        with pytest.raises(ProtocolError):
            codec.decode(type_name, body)


def test_ints_accepted_for_float_fields() -> None:
    body = b'{"name": "n", "seq": 1, "metrics": ' + _METRICS + b"}"
    assert codec.decode("Heartbeat", body).metrics.cpu_pct == 1.0
