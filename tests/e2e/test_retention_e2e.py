"""Retention over real HTTP: one short-lived event never shortens the life of a counter's buckets.

A bucket lives as long as the longest retention of the events counted in it. The local stack
runs on the real clock, so time is moved by backdating events rather than by waiting.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from tests.e2e.stack import LocalStack, wait_for

MINUTE = 60_000
HOUR = 60 * MINUTE


def post(url: LocalStack, events: list[dict[str, Any]]) -> None:
    response = url.post("/events", json={"events": events}, timeout=30)
    assert response.status_code == 201, response.text


def count_when(url: LocalStack, counter: str, params: dict[str, Any], expected: int) -> dict[str, Any]:
    """The count once the stream handler has caught up (AssertionError after a minute)."""
    body: dict[str, Any] = wait_for(
        lambda: url.get(f"/counters/{counter}", params=params, timeout=30).json(),
        60,
        f"{counter} at {expected}",
        lambda body: body.get("count") == expected,
    )
    return body


def test_given_retention_60_event_then_ordinary_events_in_its_hour_when_counted_then_24h_keeps_them(
    local_stack: LocalStack,
) -> None:
    url = local_stack
    now = int(time.time() * 1000)
    hour_start = now // HOUR * HOUR
    counter = f"e2e.retention-{secrets.token_hex(4)}"

    # The short-lived event comes first and creates the hour and day buckets on its own.
    post(url, [{"counter": counter, "time": now, "retention": 60}])
    assert count_when(url, counter, {"window": "24h"}, 1)["count"] == 1
    ordinary = [{"counter": counter, "time": max(hour_start, now - i * 1000)} for i in range(5)]
    post(url, ordinary)
    body = count_when(url, counter, {"window": "24h"}, 6)
    assert body["count"] == 6
    # The buckets now carry the ordinary events' retention (25 hours), not the first event's
    # minute: a 24-hour window is wholly retained.
    assert body["complete"] is True, body

    # After the hour has ended (a window ending 30 minutes past it): still counted, still complete.
    later = hour_start + HOUR + 30 * MINUTE
    body = count_when(url, counter, {"window": "24h", "end": later}, 6)
    assert body["count"] == 6 and body["complete"] is True, body

    # An hour that ended before the events arrive (backdated): a retention-60 event is already
    # past its life there and is not counted in it; the ordinary events of that hour are.
    past = f"{counter}.past"
    previous_hour = hour_start - 2 * HOUR  # ended an hour ago at least
    post(url, [{"counter": past, "time": previous_hour + 5 * MINUTE, "retention": 60}])
    post(url, [{"counter": past, "time": previous_hour + m * MINUTE} for m in (6, 7, 8)])
    body = count_when(url, past, {"window": "24h"}, 3)
    assert body["count"] == 3 and body["complete"] is True, body
    hours = url.get(f"/counters/{past}/histogram", params={"window": "24h", "resolution": "hour"}, timeout=30).json()
    assert sum(b["count"] for b in hours["buckets"]) == 3
