"""cluster.conf's preemption keys: what Ranch acts on, and what it refuses at the line (as
slurmctld 22.05's read_config refuses, or because Ranch has no gang scheduler)."""

from __future__ import annotations

import pytest

from ranch.conf.build import parse_config_text
from ranch.conf.errors import ConfigError
from ranch.conf.model import PreemptSettings

BASE = "ClusterName=x\nSlurmctldHost=h\nNodeName=n1 CPUs=2\nPartitionName=p Nodes=n1 Default=YES\n"


def _errors(extra: str) -> list[str]:
    with pytest.raises(ConfigError) as got:
        parse_config_text(BASE + extra, path="c.conf")
    return [str(d).splitlines()[0] for d in got.value.errors]


def test_off_by_default_and_qos_with_requeue_or_cancel() -> None:
    assert parse_config_text(BASE).preempt == PreemptSettings()
    assert not PreemptSettings().enabled
    got = parse_config_text(BASE + "PreemptType=preempt/qos\nPreemptMode=requeue\n"
                            "PreemptExemptTime=5\n").preempt
    assert got == PreemptSettings("preempt/qos", "requeue", 300) and got.enabled
    assert parse_config_text(BASE + "PreemptType=PREEMPT/QOS\nPreemptMode=CANCEL\n"
                             ).preempt.mode == "cancel"


def test_mode_and_type_must_agree_as_slurmctld_requires() -> None:
    assert _errors("PreemptType=preempt/qos\n") == [
        "c.conf:5:13: PreemptType and PreemptMode values incompatible (preempt/qos with "
        "PreemptMode=OFF)"]
    assert _errors("PreemptMode=CANCEL\n") == [
        "c.conf:5:13: PreemptType and PreemptMode values incompatible (preempt/none with "
        "PreemptMode=CANCEL)"]
    assert _errors("PreemptMode=SUSPEND\n") == [
        "c.conf:5:13: PreemptMode=SUSPEND requires GANG too"]


def test_what_ranch_does_not_implement_is_refused_at_the_line() -> None:
    [err] = _errors("PreemptType=preempt/qos\nPreemptMode=SUSPEND,GANG\n")
    assert err.startswith("c.conf:6:13: PreemptMode=SUSPEND,GANG: Ranch does not implement")
    [err] = _errors("PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n")
    assert err.startswith("c.conf:5:13: PreemptType=preempt/partition_prio: Ranch preempts by QOS")
    [err] = _errors("PreemptType=preempt/qos\nPreemptMode=REQUEUE,WITHIN\n")
    assert "WITHIN" in err
