"""A headless Firefox driven over WebDriver BiDi, the W3C protocol Firefox speaks natively.

Playwright's Firefox needs its own patched build (or, over BiDi, a Nightly), and Selenium needs
geckodriver; neither is installable here. Debian's `firefox-esr` with `--remote-debugging-port`
serves WebDriver BiDi itself, so the tests speak it directly: the handful of commands they use
(https://w3c.github.io/webdriver-bidi/) over one WebSocket.
"""

from __future__ import annotations

import base64
import json
import queue
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

FIREFOX = Path("/usr/bin/firefox-esr")
LISTENING = re.compile(r"WebDriver BiDi listening on (ws://\S+)")


class BidiError(AssertionError):
    """A command the browser refused, or a script that threw."""


class Firefox:
    """One BiDi session on one tab: navigate, run scripts, type keys, take screenshots, and
    collect what the page logs."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.next_id = 0
        self.logs: list[dict[str, Any]] = []
        self.send("session.new", {"capabilities": {"alwaysMatch": {"acceptInsecureCerts": True}}})
        self.send("session.subscribe", {"events": ["log.entryAdded"]})
        self.context = self.send("browsingContext.getTree", {})["contexts"][0]["context"]

    def send(self, method: str, params: dict[str, Any], timeout_s: float = 30) -> dict[str, Any]:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout_s
        while True:
            message = json.loads(self.socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("type") == "event":
                if message["method"] == "log.entryAdded":
                    self.logs.append(message["params"])
                continue
            if message.get("id") != self.next_id:
                continue
            if message.get("type") == "error":
                raise BidiError(f"{method}: {message.get('error')}: {message.get('message')}")
            result: dict[str, Any] = message["result"]
            return result

    def navigate(self, url: str) -> None:
        self.send("browsingContext.navigate", {"context": self.context, "url": url, "wait": "complete"})

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a script run in the page (awaited when it is a promise)."""
        result = self.send(
            "script.evaluate",
            {
                "expression": f"(async () => JSON.stringify(await ({expression})))()",
                "target": {"context": self.context},
                "awaitPromise": True,
                "resultOwnership": "none",
            },
        )
        if result.get("type") == "exception":
            raise BidiError(f"script threw: {result['exceptionDetails'].get('text')}: {expression}")
        value = result["result"].get("value")
        return None if value is None else json.loads(value)

    def wait_until(self, expression: str, what: str, timeout_s: float = 20) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what} in Firefox")
            time.sleep(0.1)

    def press(self, *keys: str) -> None:
        """Real key presses (keydown, keyup) sent to the focused element; keys as WebDriver
        code points, for example "\\ue014" for ArrowRight, "\\ue007" for Enter."""
        actions = [a for key in keys for a in ({"type": "keyDown", "value": key}, {"type": "keyUp", "value": key})]
        self.send(
            "input.performActions",
            {"context": self.context, "actions": [{"type": "key", "id": "keyboard", "actions": actions}]},
        )

    def set_viewport(self, width: int, height: int) -> None:
        self.send(
            "browsingContext.setViewport", {"context": self.context, "viewport": {"width": width, "height": height}}
        )

    def screenshot(self, path: Path) -> None:
        data = self.send("browsingContext.captureScreenshot", {"context": self.context})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def page_errors(self) -> list[str]:
        """Errors the page logged or threw (console.error and uncaught exceptions)."""
        return [
            f"{entry.get('type')}: {entry.get('text')}"
            for entry in self.logs
            if entry.get("level") == "error" and entry.get("source", {}).get("context") == self.context
        ]

    def version(self) -> str:
        return str(self.evaluate("navigator.userAgent"))


@contextmanager
def firefox(profile: Path, width: int = 1100, height: int = 760) -> Iterator[Firefox]:
    """A fresh headless Firefox on a new profile directory, closed on exit."""
    profile.mkdir(parents=True, exist_ok=True)  # Firefox waits on a dialog for a missing one
    process = subprocess.Popen(
        [str(FIREFOX), "--headless", "--no-remote", "--profile", str(profile), "--remote-debugging-port=0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = _listening_url(process)
        with connect(f"{url}/session", max_size=None, open_timeout=30) as socket:
            browser = Firefox(socket)
            browser.set_viewport(width, height)
            try:
                yield browser
            finally:
                try:
                    browser.send("session.end", {}, timeout_s=5)
                except Exception:
                    pass
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _listening_url(process: subprocess.Popen[str], timeout_s: float = 60) -> str:
    """The BiDi address Firefox prints on stderr; stderr is read to the end by a thread, so a
    full pipe never stalls the browser and a silent browser cannot stall the test."""
    assert process.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stderr or []], daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        seen.append(line)
        match = LISTENING.search(line)
        if match:
            return match.group(1)
    raise AssertionError("Firefox did not start its WebDriver BiDi server:\n" + "".join(seen[-20:]))
