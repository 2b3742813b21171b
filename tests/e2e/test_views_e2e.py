"""Views end to end: real HTTP against the local stack, whose SQS poller runs the handler."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.e2e.stack import LocalStack, wait_for
from tools.stage import stage_settings

pytestmark = pytest.mark.e2e
# A day ago, to the minute: a view is accepted only within the views horizon of the real clock.
T0 = (int(time.time() * 1000) - 86_400_000) // 60_000 * 60_000


@pytest.fixture
def api(local_stack: LocalStack) -> LocalStack:
    return local_stack


def views(api: LocalStack, url: str, **params: Any) -> int:
    response = api.get("/views", params={"url": url, **params}, timeout=5)
    assert response.status_code == 200, response.text
    return int(response.json()["views"])


def counted(api: LocalStack, expected: dict[str, int]) -> dict[str, int]:
    """The views of each URL once they reach `expected` (AssertionError after a minute)."""
    seen: dict[str, int] = wait_for(
        lambda: {url: views(api, url) for url in expected}, 60, "the views counted", lambda seen: seen == expected
    )
    return seen


def test_given_views_with_duplicates_when_posted_over_http_then_each_distinct_view_counted_once(
    api: LocalStack,
) -> None:
    urls = [f"https://blog.example/e2e/{i}" for i in range(3)]
    distinct = [{"url": urls[i % 3], "time": T0 + i * 1000, "clientId": f"c{i % 4}"} for i in range(30)]
    # The same view within one request, and whole requests sent again (a client's retries).
    first = distinct[:20] + distinct[:5]
    for start in range(0, len(first), 25):
        response = api.post("/views", json={"views": first[start : start + 25]}, timeout=5)
        assert response.status_code == 202 and response.json() == {"accepted": True}
    for body in distinct[10:] + distinct[15:20]:
        assert api.post("/views", json=body, timeout=5).status_code == 202
    expected = {url: sum(1 for v in distinct if v["url"] == url) for url in urls}
    assert counted(api, expected) == expected
    # Every message handled, redeliveries and duplicates included: none is left to push a count
    # past the truth, and the counts still are the truth.
    queue = stage_settings("local").views_queue
    wait_for(lambda: api.messages_left(queue), 60, "the views queue drained", lambda left: left == 0)
    assert {url: views(api, url) for url in urls} == expected
    # A range counts the minutes from floor(start) to floor(end), both included, from the buckets.
    for start, end in [(T0, T0 + 10_000), (T0 + 20_000, T0 + 29_000), (T0 - 86_400_000, T0 + 86_400_000)]:
        first, last = start // 60_000, end // 60_000
        expected_range = sum(1 for v in distinct if v["url"] == urls[0] and first <= v["time"] // 60_000 <= last)
        assert views(api, urls[0], start=start, end=end) == expected_range, (start, end)
    # The top URLs of the last 7 days under the prefix (the README's line): exact, most viewed first.
    response = api.get("/views/top", params={"window": "7d", "prefix": "https://blog.example/e2e/"}, timeout=5)
    assert response.status_code == 200, response.text
    top = response.json()
    ranked = sorted(expected.items(), key=lambda uv: (-uv[1], uv[0]))
    assert [(u["url"], u["views"]) for u in top["urls"]] == ranked and top["exact"] is True


def test_given_bad_view_when_posted_over_http_then_400_in_chalice_error_shape(api: LocalStack) -> None:
    response = api.post("/views", json={"url": "https://blog.example/", "clientId": "c"}, timeout=5)
    assert response.status_code == 400
    assert set(response.json()) == {"Code", "Message"}
    assert "time" in response.json()["Message"]


def test_given_three_good_views_a_lone_surrogate_view_and_three_more_when_posted_then_400_for_it_and_six_counted(
    api: LocalStack,
) -> None:
    url = "https://blog.example/e2e/poison-between-good"
    headers = {"Content-Type": "application/json"}
    good = [json.dumps({"url": url, "time": T0 + i * 1000, "clientId": f"c{i}"}) for i in range(6)]
    # Valid JSON, not valid text: the escape stands for half of a UTF-16 pair.
    bad = '{"url": "%s", "time": %d, "clientId": "\\udc00x"}' % (url, T0 + 99_000)
    for body in good[:3]:
        assert api.post("/views", data=body, headers=headers, timeout=5).status_code == 202
    refused = api.post("/views", data=bad, headers=headers, timeout=5)
    assert refused.status_code == 400
    assert set(refused.json()) == {"Code", "Message"} and "clientId" in refused.json()["Message"]
    for body in good[3:]:
        assert api.post("/views", data=body, headers=headers, timeout=5).status_code == 202
    assert counted(api, {url: 6}) == {url: 6}


def test_given_an_event_id_with_a_lone_surrogate_when_posted_over_http_then_400_naming_the_id(api: LocalStack) -> None:
    body = '{"counter": "e2e.surrogate", "id": "\\udc00x"}'
    response = api.post("/events", data=body, headers={"Content-Type": "application/json"}, timeout=5)
    assert response.status_code == 400
    assert set(response.json()) == {"Code", "Message"} and "id" in response.json()["Message"]
