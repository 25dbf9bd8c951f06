"""A headless chromium driven over the Chrome DevTools Protocol on a pipe (no extra packages).

chromium --remote-debugging-pipe reads commands from fd 3 and writes replies and events to fd 4,
JSON messages ending in a NUL byte. Page scripts run through Runtime.evaluate, so a test drives
the page the way its own buttons do.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class CdpError(Exception):
    pass


class Browser:
    def __init__(self, binary: str, width: int = 1400, height: int = 900) -> None:
        self.profile = tempfile.mkdtemp(prefix="ranch-chromium-")
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()

        def wire() -> None:  # in the child: the pipe ends on the fds chromium expects
            os.dup2(cmd_r, 3)
            os.dup2(res_w, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"],
            pass_fds=(3, 4), preexec_fn=wire, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._next = 0
        self.session: str | None = None

    def _send(self, method: str, params: dict | None, session: str | None) -> int:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        return self._next

    def _read(self, timeout: float) -> dict:
        import select

        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._res_r], [], [], left)[0]:
                raise CdpError("chromium did not answer in time")
            chunk = os.read(self._res_r, 1 << 20)
            if not chunk:
                raise CdpError("chromium closed its pipe")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, *, session: str | None = None,
             timeout: float = 20.0) -> dict:
        want = self._send(method, params, session)
        while True:
            msg = self._read(timeout)
            if msg.get("id") == want:
                if "error" in msg:
                    raise CdpError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        self.page("Page.enable")
        self.page("Runtime.enable")
        self.page("Page.navigate", {"url": url})

    def page(self, method: str, params: dict | None = None, timeout: float = 20.0) -> dict:
        return self.call(method, params, session=self.session, timeout=timeout)

    def js(self, expression: str, timeout: float = 20.0) -> Any:
        """The value of a page expression (promises awaited)."""
        res = self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True}, timeout)
        if "exceptionDetails" in res:
            raise CdpError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_js(self, expression: str, timeout: float = 20.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        error = ""
        while time.monotonic() < deadline:
            try:  # the page may still be loading: its elements are not there yet
                value = self.js(expression)
            except CdpError as exc:
                value, error = None, str(exc)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"page never showed {what or expression}"
                             + (f" (last error: {error})" if error else ""))

    def screenshot(self, path: str) -> None:
        data = self.page("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (CdpError, OSError):
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._cmd_w, self._res_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
