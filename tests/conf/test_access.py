"""Issue 19's keys: AuthType, AuthInfo, SlurmUser, AdminUsers, PrivateData, DisableRootJobs."""

from __future__ import annotations

import pytest

from ranch.conf.build import parse_config_text
from ranch.conf.errors import ConfigError

BASE = "NodeName=n1\nPartitionName=a Nodes=n1 Default=YES\n"


def test_multi_user_keys_are_read() -> None:
    cfg = parse_config_text(
        "AuthType=auth/munge\nAuthInfo=socket=run/munge.sock,ttl=60\nSlurmUser=slurm\n"
        "AdminUsers=alice,%wheel\nPrivateData=Jobs,nodes,usage\n" + BASE,
        path="/etc/ranch/cluster.conf")
    a = cfg.access
    assert (a.auth_type, a.slurm_user, a.admin_users) == ("auth/munge", "slurm",
                                                          ("alice", "%wheel"))
    assert a.munge_socket == "/etc/ranch/run/munge.sock", "relative to the config, like paths"
    assert a.private_data == ("jobs", "nodes", "usage")
    assert "AuthType" not in cfg.ignored and "PrivateData" not in cfg.ignored


def test_defaults_are_slurms() -> None:
    a = parse_config_text(BASE).access
    assert (a.auth_type, a.slurm_user, a.private_data, a.disable_root_jobs) == ("", "root", (),
                                                                                False)


def test_disable_root_jobs_is_inherited_unless_a_partition_says_otherwise() -> None:
    cfg = parse_config_text("DisableRootJobs=YES\nNodeName=n1\nPartitionName=a Nodes=n1\n"
                            "PartitionName=b Nodes=n1 DisableRootJobs=NO\n")
    assert [dict(p.options)["DisableRootJobs"] for p in cfg.partitions] == ["YES", "NO"]


@pytest.mark.parametrize(("line", "col", "said"), [
    ("AuthType=auth/slurm", 10, "unknown value 'auth/slurm'; valid values: AUTH/MUNGE"),
    ("PrivateData=jobs,secrets", 18, "unknown value 'secrets'"),
    ("DisableRootJobs=maybe", 17, "'maybe' is not YES or NO"),
])
def test_bad_values_name_the_place(line: str, col: int, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config_text(line + "\n" + BASE, path="c.conf")
    first = err.value.errors[0]
    assert (first.line, first.col) == (1, col) and said in first.message, first


def test_a_partitions_bad_disable_root_jobs_names_its_place() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config_text("NodeName=n1\nPartitionName=a Nodes=n1 DisableRootJobs=perhaps\n")
    first = err.value.errors[0]
    assert first.line == 2 and "'perhaps' is not YES or NO" in first.message
