"""Who may read and write over HTTP: HttpAuth=token, an unsafe token file, and the token parser."""

from __future__ import annotations

import os
import time

import httpx
import pytest

from ranch.ctld.web.tokens import TokenError, Tokens, bearer, is_loopback, parse_tokens
from tests.web.http_cluster import TOKEN, http_cluster, start


def test_token_mode_needs_a_token_for_every_read(tmp_path) -> None:
    c = http_cluster(tmp_path, extra="HttpAuth=token")
    with c:
        start(c)
        base = c.http  # type: ignore[attr-defined]
        for path in ("/api/v1/nodes", "/api/v1/nodes/n1", "/api/v1/partitions",
                     "/api/v1/sinfo", "/metrics", "/ui/grid.json", "/ui/node/n1"):
            r = httpx.get(base + path, timeout=10)
            assert r.status_code == 401, path
            assert r.headers["www-authenticate"] == "Bearer"
            ok = httpx.get(base + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
            assert ok.status_code == 200, (path, ok.text)
        assert httpx.get(base + "/", timeout=10).status_code == 200  # the page holds no data


def test_a_group_readable_token_file_is_refused(tmp_path) -> None:
    c = http_cluster(tmp_path, token_mode=0o640)
    with c:
        start(c)
        base = c.http  # type: ignore[attr-defined]
        r = httpx.post(base + "/api/v1/nodes/n1/state", json={"state": "DRAIN", "reason": "x"},
                       headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert r.status_code == 503
        error = r.json()["errors"][0]["error"]
        assert "accessible by group or others (mode 0640)" in error
        assert f"chmod 600 {tmp_path / 'tokens'}" in error
        assert c.state("n1") == "IDLE"
        assert "HTTP writes disabled until the token file is fixed" in c.log("rctld")
        assert httpx.get(base + "/api/v1/nodes", timeout=10).status_code == 200  # loopback
        os.chmod(tmp_path / "tokens", 0o600)  # fixed without a restart
        deadline = time.monotonic() + 10  # the file is looked at again within a second
        while True:
            r = httpx.post(base + "/api/v1/nodes/n1/state",
                           json={"state": "DRAIN", "reason": "x"},
                           headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
            if r.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r.status_code == 200, r.text


@pytest.mark.parametrize(("text", "error"), [
    ("alice\n", "t:1: expected NAME:TOKEN"),
    ("# c\n\nalice:\n", "t:3: expected NAME:TOKEN"),
    ("alice:short\n", "t:1: token of 'alice' is shorter than 16 characters"),
    ("a:0123456789abcdefg\nb:0123456789abcdefg\n", "t:2: token of 'b' is also 'a''s"),
])
def test_token_file_errors_name_the_line(text: str, error: str) -> None:
    with pytest.raises(TokenError, match=error.replace("(", r"\(")):
        parse_tokens(text, "t")


def test_tokens_reload_when_the_file_changes(tmp_path) -> None:
    path = tmp_path / "tok"
    path.write_text("alice:0123456789abcdefg\n")
    os.chmod(path, 0o600)
    now = [100.0]
    tokens = Tokens(str(path), clock=lambda: now[0])
    assert tokens.name_of("0123456789abcdefg") == "alice"
    assert tokens.name_of("0123456789abcdefX") is None
    path.write_text("carol:zyxwvutsrqponmlkjih\n")
    os.utime(path, ns=(1, 1))
    now[0] += 0.5  # the file is looked at once a second, not per request
    assert tokens.name_of("0123456789abcdefg") == "alice"
    now[0] += 0.5
    assert tokens.name_of("0123456789abcdefg") is None
    assert tokens.name_of("zyxwvutsrqponmlkjih") == "carol"
    assert Tokens(None).problem() == "no HttpTokenFile is configured"
    assert "No such file or directory" in (Tokens(str(tmp_path / "missing")).problem() or "")


def test_header_and_address_readings() -> None:
    assert bearer("Bearer abc") == "abc" and bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None and bearer(None) is None and bearer("Bearer ") is None
    assert is_loopback("127.0.0.1") and is_loopback("127.8.0.1") and is_loopback("::1")
    assert not is_loopback("10.0.0.1") and not is_loopback(None) and not is_loopback("host")
