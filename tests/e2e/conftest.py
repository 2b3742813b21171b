"""The local stack (`python -m tools.local_stack`) started on free ports, for real HTTP tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import requests

PROJECT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalStack:
    def __init__(self, url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.url = url
        self.process = process
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def trigger_schedules(self) -> None:
        self.process.send_signal(signal.SIGUSR1)


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    port, aws_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(REPORT_SETTLE_SECONDS="0")
    log_path = tmp_path_factory.mktemp("local-stack") / "stack.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tools.local_stack", "--port", str(port), "--aws-port", str(aws_port),
             "--max-batching-window", "1"],
            cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    stack = LocalStack(f"http://127.0.0.1:{port}", process, log_path)
    deadline = time.monotonic() + 90
    while True:
        if process.poll() is not None:
            pytest.fail(f"the local stack exited early:\n{stack.log()}")
        try:
            if requests.get(f"{stack.url}/counters/ready", timeout=2).status_code == 200:
                break
        except requests.ConnectionError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the local stack did not answer in time:\n{stack.log()}")
        time.sleep(0.3)
    yield stack
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
