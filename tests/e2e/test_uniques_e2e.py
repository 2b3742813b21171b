"""Unique counts over real HTTP: the local stack as a subprocess, its SQS runner feeding the handler."""

from __future__ import annotations

import time

import pytest

from chalicelib.core import times
from chalicelib.uniques import sketches
from tests.e2e.stack import LocalStack, wait_for

pytestmark = pytest.mark.e2e
P = sketches.precision_for(0.01)


def expected(api: LocalStack, items: list[str]) -> int:
    return sketches.estimate(sketches.from_hashes(P, sketches.item_hashes(api.item_key, items)))


def cardinality(api: LocalStack, path: str) -> int:
    response = api.get(path, timeout=5)
    response.raise_for_status()
    return int(response.json()["cardinality"])


def listed_names(api: LocalStack) -> set[str]:
    response = api.get("/hyperloglog", params={"limit": 1000}, timeout=5)
    response.raise_for_status()
    return {n["name"] for n in response.json()["names"]}


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
    want = expected(api, first)
    wait_for(lambda: cardinality(api, "/hyperloglog/e2e.home") == want, 60, f"e2e.home to reach {want}")
    wait_for(lambda: cardinality(api, "/hyperloglog/e2e.pricing") == expected(api, second), 60, "e2e.pricing")
    assert cardinality(api, "/hyperloglog?names=e2e.home,e2e.pricing") == expected(api, first + second)
    assert cardinality(api, "/hyperloglog/e2e.nobody") == 0


def test_given_bad_input_over_http_when_posted_then_400_with_chalice_error_body(local_stack: LocalStack) -> None:
    api = local_stack
    response = api.post("/hyperloglog/e2e.bad", json={"data": ["x" * 1025]}, timeout=5)
    assert response.status_code == 400
    assert set(response.json()) == {"Code", "Message"}
    assert api.post("/hyperloglog/bad name", json={"data": "x"}, timeout=5).status_code == 400


def test_given_backdated_items_over_http_when_windows_read_then_each_window_counts_its_items(
    local_stack: LocalStack,
) -> None:
    api = local_stack
    now = int(time.time() * 1000)
    day, hour = 86_400_000, 3_600_000
    recent = [f"w-{i}" for i in range(40)]  # 3 hours ago: exact, inside every window
    older = [f"w-{i}" for i in range(20, 1020)]  # two days ago: inside 7d and 30d only
    ancient = [f"w-{i}" for i in range(5000, 5100)]  # 40 days ago: inside none
    for data, at in ((recent, now - 3 * hour), (older, now - 2 * day), (ancient, now - 40 * day)):
        for start in range(0, len(data), 500):
            body = {"data": data[start : start + 500], "time": times.iso(at)}
            assert api.post("/hyperloglog/e2e.window", json=body, timeout=5).status_code == 202
    want = expected(api, recent + older + ancient)
    wait_for(lambda: cardinality(api, "/hyperloglog/e2e.window") == want, 60, "all the items to be merged")
    day_answer = api.get("/hyperloglog/e2e.window", params={"window": "24h"}, timeout=5).json()
    assert day_answer["cardinality"] == 40 and day_answer["lower"] == day_answer["upper"] == 40
    assert day_answer["keys_read"] <= 24 and day_answer["complete"] is True
    month = api.get("/hyperloglog/e2e.window", params={"window": "30d"}, timeout=5).json()
    assert month["cardinality"] == expected(api, recent + older) and month["keys_read"] <= 76
    assert month["lower"] <= month["cardinality"] <= month["upper"]
    series = api.get("/hyperloglog/e2e.window/histogram", params={"resolution": "day", "window": "30d"}).json()
    assert sorted(b["cardinality"] for b in series["buckets"] if b["cardinality"])[-2:] == [40, expected(api, older)]
    wait_for(lambda: "e2e.window" in listed_names(api), 10, "e2e.window to be listed")  # written after the sketches
    surrogate = '{"data": "a\\ud800"}'
    response = api.post("/hyperloglog/e2e.window", data=surrogate, timeout=5)
    assert response.status_code == 400 and set(response.json()) == {"Code", "Message"}
