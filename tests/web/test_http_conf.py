"""HttpListen, HttpTokenFile and HttpAuth in cluster.conf."""

from __future__ import annotations

import pytest

from ranch.conf.build import parse_config_text
from ranch.conf.errors import ConfigError

BASE = "ClusterName=c\nSlurmctldHost=h\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"


def test_defaults_leave_http_off() -> None:
    http = parse_config_text(BASE).http
    assert (http.listen, http.token_file, http.auth) == (None, None, "loopback")


def test_keys_are_read_and_the_token_path_resolved(tmp_path) -> None:
    cfg = parse_config_text(BASE + "HttpListen=:8080\nHttpTokenFile=tok\nHttpAuth=Token\n",
                            path=str(tmp_path / "c.conf"))
    assert cfg.http.listen == ":8080"
    assert cfg.http.token_file == str(tmp_path / "tok")
    assert cfg.http.auth == "token"


@pytest.mark.parametrize(("line", "needle"), [
    ("HttpListen=8080", "expected HOST:PORT"),
    ("HttpListen=host:99999", "port from 1 to 65535"),
    ("HttpListen=[::1:80", "unbalanced brackets"),
    ("HttpAuth=open", "HttpAuth"),
])
def test_bad_values_are_errors_naming_the_key(line: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config_text(BASE + line + "\n")
    text = "\n".join(d.format() for d in info.value.errors)
    assert needle in text and line.split("=")[0] in text
