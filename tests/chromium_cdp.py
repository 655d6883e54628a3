"""Drive Debian's headless Chromium over the DevTools protocol on a pipe (no network, no extra package).

``--remote-debugging-pipe`` makes Chromium read protocol commands from file descriptor 3 and
write replies and events to descriptor 4, each message a JSON object ended by a NUL byte.
:class:`Browser` opens one page, records console errors, uncaught exceptions and every
request that is not a ``file:`` or ``data:`` URL, evaluates JavaScript and takes screenshots.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

_TIMEOUT_SEC = 60.0


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, profile: Path, *, width: int = 1400, height: int = 1000) -> None:
        if CHROMIUM is None:
            raise RuntimeError("Debian's chromium is not installed: apt-get install -y chromium")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def _wire_fds() -> None:
            # Copies first, so neither end overwrites the other if the pipes already sit on 3 or 4.
            os.dup2(to_chrome_r, 100)
            os.dup2(from_chrome_w, 101)
            os.dup2(100, 3)
            os.dup2(101, 4)

        self._proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--window-size={width},{height}",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # A preexec function is the only way to place the pipe on descriptors 3 and 4.
            preexec_fn=_wire_fds,
            pass_fds=(3, 4),
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self._session: str | None = None
        self.console_errors: list[str] = []
        self.external_requests: list[str] = []
        self.size = (width, height)

    def __enter__(self) -> Browser:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        width, height = self.size
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._session = None
            self.send("Browser.close")
        except (OSError, RuntimeError, TimeoutError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        os.close(self._to_chrome)
        os.close(self._from_chrome)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def _event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params") or {}
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            self.console_errors.append(
                str((details.get("exception") or {}).get("description") or details.get("text"))
            )
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.console_errors.append(
                " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", []))
            )
        elif method == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
            self.console_errors.append(str(params["entry"].get("text")))
        elif method == "Network.requestWillBeSent":
            url = str((params.get("request") or {}).get("url", ""))
            if not url.startswith(("file:", "data:", "about:")):
                self.external_requests.append(url)

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one command and return its result (events that arrive meanwhile are recorded)."""
        self._next_id += 1
        call_id = self._next_id
        message: dict[str, Any] = {"id": call_id, "method": method, "params": params or {}}
        if self._session is not None:
            message["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + _TIMEOUT_SEC
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == call_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result") or {}
                return result
            self._event(reply)

    def wait_for(self, event: str) -> dict[str, Any]:
        """Wait for one event (recording the others)."""
        deadline = time.monotonic() + _TIMEOUT_SEC
        while True:
            message = self._read_message(deadline)
            if message.get("method") == event:
                params: dict[str, Any] = message.get("params") or {}
                return params
            self._event(message)

    def open(self, url: str) -> None:
        """Navigate and wait until the page has loaded."""
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def eval(self, expression: str) -> Any:
        """Evaluate JavaScript in the page and return its value."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} raised {result['exceptionDetails']}")
        return (result.get("result") or {}).get("value")

    def screenshot(self, path: Path, *, full_height: int | None = None) -> None:
        """Save a PNG of the page (``full_height`` pixels tall when given)."""
        params: dict[str, Any] = {"format": "png"}
        if full_height is not None:
            width, _ = self.size
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": full_height, "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
