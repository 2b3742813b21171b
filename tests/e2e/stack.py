"""Starting the local stack (`python -m tools.local_stack`) as a subprocess on free ports."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import requests

PROJECT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll `check` until it returns something truthy; connection errors count as not yet."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            result = check()
        except requests.RequestException:
            result = None
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


class LocalStack:
    """A running local stack. `get`/`post`/`request` take a path and send the local admin
    key (`admin_key`) unless given `key=` (None: no key); `http` is a requests session that
    sends it too."""

    def __init__(self, url: str, process: subprocess.Popen[bytes], log_path: Path, admin_key_path: Path) -> None:
        self.url = url
        self.process = process
        self.log_path = log_path
        self.admin_key_path = admin_key_path
        self.http = requests.Session()

    @property
    def admin_key(self) -> str:
        return self.admin_key_path.read_text().strip()

    def request(self, method: str, path: str, key: str | bool | None = True, **kwargs: Any) -> requests.Response:
        headers = dict(kwargs.pop("headers", None) or {})
        if key is True:
            key = self.admin_key
        if isinstance(key, str):
            headers.setdefault("Authorization", f"Bearer {key}")
        kwargs.setdefault("timeout", 30)
        return requests.request(method, f"{self.url}{path}", headers=headers, **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, **kwargs)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def trigger_schedules(self) -> None:
        """What `make trigger` does: run every scheduled handler now."""
        self.process.send_signal(signal.SIGUSR1)


@contextlib.contextmanager
def running_stack(log_dir: Path, **environment: str) -> Iterator[LocalStack]:
    port, aws_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(environment)
    log_path = log_dir / "stack.log"
    admin_key_path = log_dir / "local-admin-key"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tools.local_stack",
                "--port",
                str(port),
                "--aws-port",
                str(aws_port),
                "--max-batching-window",
                "1",
                "--admin-key-file",
                str(admin_key_path),
            ],
            cwd=PROJECT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    stack = LocalStack(f"http://127.0.0.1:{port}", process, log_path, admin_key_path)

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the local stack exited early:\n{stack.log()}")
        if not admin_key_path.exists():
            return False
        stack.http.headers["Authorization"] = f"Bearer {stack.admin_key}"
        return stack.get("/counters/ready", timeout=2).status_code == 200

    try:
        wait_for(ready, 90, "the local stack")
        yield stack
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
