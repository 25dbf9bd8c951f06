"""A reconfigure clears the deadline heap and re-arms every owner's timers: a maintenance window
made before it still opens on time, and a reboot issued before it still times out."""

from __future__ import annotations

from ranch.conf.build import parse_config_text
from ranch.ctld.compose import assemble
from ranch.protocol import messages as m
from tests.ctld.helpers import FakeConn, hardware

BASE = 1.7e9
CONF = """ClusterName=t
SlurmctldHost=ctl(127.0.0.1)
RebootProgram=/bin/true
ResumeTimeout=60
{extra}
NodeName=n[1-2] CPUs=4 RealMemory=1000 TmpDisk=100
PartitionName=a Nodes=n[1-2] Default=YES
"""


def _config(extra: str = ""):
    return parse_config_text(CONF.format(extra=extra), path="/t.conf")


def test_windows_and_reboot_timeouts_survive_a_reconfigure() -> None:
    now = [0.0]
    c = assemble(_config(), clock=lambda: now[0], wall=lambda: BASE + now[0])
    for name in ("n1", "n2"):
        c.traffic.register(m.Register(name, hardware(), 1.0, "0.1.0"), FakeConn())
    reply = c.reservation(m.ReservationRequest(
        "create", name="r1", start=BASE + 100, duration=5, nodes="n1", users=("bob",),
        user="root", flags=("MAINT",)))
    assert reply.ok, reply
    assert c.reboots.request(m.RebootNodes("n2", user="root")).ok
    assert "REBOOT_ISSUED" in c.registry.nodes["n2"].complete

    assert c.apply_config(_config("KillWait=40")).ok  # clears every deadline, re-arms them

    now[0] = 200.0  # inside the window (100..400 s); past the reboot's ResumeTimeout of 60 s
    c.on_deadlines(c.deadlines.pop_due(now[0]))
    n1, n2 = c.registry.nodes["n1"].complete, c.registry.nodes["n2"].complete
    assert "MAINT" in n1 and "RESERVED" in n1, n1
    assert n2.startswith("DOWN") and "REBOOT_ISSUED" not in n2, n2
