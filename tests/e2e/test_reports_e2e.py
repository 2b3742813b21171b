"""Reports end to end: the local stack as a subprocess, events in and reports out over HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import requests

pytestmark = pytest.mark.e2e
PROJECT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            result = check()
        except requests.RequestException:
            result = None
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port, aws_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # Events ingested a moment ago are reportable at once.
    env.update(REPORT_SETTLE_SECONDS="0", AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION="us-east-1")
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.local_stack", "--port", str(port), "--aws-port", str(aws_port)],
        cwd=PROJECT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    api = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: requests.get(f"{api}/reports", timeout=2).status_code == 200, 90, "the local stack")
        yield api, process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_given_events_posted_when_schedule_triggered_and_run_requested_then_reports_served_over_http(
    stack: tuple[str, subprocess.Popen[bytes]]
) -> None:
    api, process = stack
    first = [{"counter": "sales", "attributes": {"amount": 2.5}}, {"counter": "sales", "attributes": {"amount": 4}},
             {"counter": "signups"}]
    assert requests.post(f"{api}/events", json={"events": first}, timeout=10).status_code == 201
    time.sleep(0.05)

    # The scheduled handler, run by the stack on demand (what `make trigger` does).
    process.send_signal(signal.SIGUSR1)
    listed = wait_for(lambda: requests.get(f"{api}/reports", timeout=5).json()["reports"], 30, "the scheduled report")
    assert [r["events"] for r in listed] == [3]
    report = requests.get(f"{api}/reports/{listed[0]['id']}", timeout=5).json()
    assert report["counters"] == {"sales": {"events": 2, "sums": {"amount": 6.5}},
                                  "signups": {"events": 1, "sums": {}}}

    assert requests.post(f"{api}/events", json={"counter": "sales", "attributes": {"amount": 1}},
                         timeout=10).status_code == 201
    time.sleep(0.05)
    ran = requests.post(f"{api}/reports", timeout=30)
    assert ran.status_code == 201
    (second,) = ran.json()["reports"]
    listed = requests.get(f"{api}/reports", timeout=5).json()["reports"]
    assert [r["id"] for r in listed] == [second["id"], report["id"]]
    assert listed[0]["start"] == report["end"]
    fetched = requests.get(f"{api}/reports/{second['id']}", timeout=5)
    assert fetched.status_code == 200
    assert fetched.json()["counters"] == {"sales": {"events": 1, "sums": {"amount": 1}}}
    assert requests.get(f"{api}/reports/20201121T230000000Z-20201122T000000000Z", timeout=5).status_code == 404
