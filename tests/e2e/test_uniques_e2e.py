"""Unique counts over real HTTP: the local stack as a subprocess, its SQS runner feeding the handler."""

from __future__ import annotations

import pytest

from chalicelib.uniques import sketch_encoding as sketches
from tests.e2e.stack import LocalStack, wait_for

pytestmark = pytest.mark.e2e
P = sketches.precision_for(0.01)


def expected(items: list[str]) -> int:
    return sketches.estimate(sketches.from_hashes(P, sketches.item_hashes(items)))


def cardinality(api: LocalStack, path: str) -> int:
    response = api.get(path, timeout=5)
    response.raise_for_status()
    return int(response.json()["cardinality"])


def test_given_items_posted_over_http_when_the_queue_is_drained_then_counts_and_union_are_right(
    local_stack: LocalStack,
) -> None:
    api = local_stack
    first = [f"visitor-{i}" for i in range(1200)]
    second = [f"visitor-{i}" for i in range(1000, 1600)]
    for name, data in (("e2e.home", first), ("e2e.pricing", second)):
        for start in range(0, len(data), 500):
            response = api.post(f"/hyperloglog/{name}", json={"data": data[start : start + 500]}, timeout=5)
            assert response.status_code == 202
            assert response.json() == {"accepted": len(data[start : start + 500])}
    api.post("/hyperloglog/e2e.home", json={"data": "visitor-1"}, timeout=5)  # a repeat
    want = expected(first)
    wait_for(lambda: cardinality(api, "/hyperloglog/e2e.home") == want, 60, f"e2e.home to reach {want}")
    wait_for(lambda: cardinality(api, "/hyperloglog/e2e.pricing") == expected(second), 60, "e2e.pricing")
    assert cardinality(api, "/hyperloglog?names=e2e.home,e2e.pricing") == expected(first + second)
    assert cardinality(api, "/hyperloglog/e2e.nobody") == 0


def test_given_bad_input_over_http_when_posted_then_400_with_chalice_error_body(local_stack: LocalStack) -> None:
    api = local_stack
    response = api.post("/hyperloglog/e2e.bad", json={"data": ["x" * 1025]}, timeout=5)
    assert response.status_code == 400
    assert set(response.json()) == {"Code", "Message"}
    assert api.post("/hyperloglog/bad name", json={"data": "x"}, timeout=5).status_code == 400
