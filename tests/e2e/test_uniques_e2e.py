"""Unique counts over real HTTP: the local stack as a subprocess, its SQS runner feeding the handler."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import requests

from chalicelib import sketches

pytestmark = pytest.mark.e2e
PROJECT = Path(__file__).resolve().parents[2]
P = sketches.precision_for(0.01)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            answer = check()
        except requests.RequestException:
            answer = None
        if answer:
            return answer
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port, aws_port = free_port(), free_port()
    log = (tmp_path_factory.mktemp("uniques-stack") / "stack.log").open("w")
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.local_stack", "--port", str(port), "--aws-port", str(aws_port),
         "--max-batching-window", "1"],
        cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            if process.poll() is not None:
                pytest.fail(f"the local stack exited with {process.returncode}; see {log.name}")
            return requests.get(f"{url}/hyperloglog/ping", timeout=2).ok

        wait_for(ready, 90, "the local stack")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def expected(items: list[str]) -> int:
    return sketches.estimate(sketches.from_hashes(P, sketches.item_hashes(items)))


def cardinality(api: str, path: str) -> int:
    response = requests.get(f"{api}{path}", timeout=5)
    response.raise_for_status()
    return int(response.json()["cardinality"])


def test_given_items_posted_over_http_when_the_queue_is_drained_then_counts_and_union_are_right(api: str) -> None:
    first = [f"visitor-{i}" for i in range(1200)]
    second = [f"visitor-{i}" for i in range(1000, 1600)]
    for name, data in (("e2e.home", first), ("e2e.pricing", second)):
        for start in range(0, len(data), 500):
            response = requests.post(f"{api}/hyperloglog/{name}", json={"data": data[start:start + 500]}, timeout=5)
            assert response.status_code == 202
            assert response.json() == {"accepted": len(data[start:start + 500])}
    requests.post(f"{api}/hyperloglog/e2e.home", json={"data": "visitor-1"}, timeout=5)  # a repeat
    want = expected(first)
    wait_for(lambda: cardinality(api, "/hyperloglog/e2e.home") == want, 60, f"e2e.home to reach {want}")
    wait_for(lambda: cardinality(api, "/hyperloglog/e2e.pricing") == expected(second), 60, "e2e.pricing")
    assert cardinality(api, "/hyperloglog?names=e2e.home,e2e.pricing") == expected(first + second)
    assert cardinality(api, "/hyperloglog/e2e.nobody") == 0


def test_given_bad_input_over_http_when_posted_then_400_with_chalice_error_body(api: str) -> None:
    response = requests.post(f"{api}/hyperloglog/e2e.bad", json={"data": ["x" * 1025]}, timeout=5)
    assert response.status_code == 400
    assert set(response.json()) == {"Code", "Message"}
    assert requests.post(f"{api}/hyperloglog/bad name", json={"data": "x"}, timeout=5).status_code == 400
