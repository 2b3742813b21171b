"""Count and histogram answers say `complete` and `retained_from` for exactly what they read."""

from __future__ import annotations

import json
import random
from typing import Any

from chalicelib.core.times import parse as time_ms
from tests.functional.helpers import invoke
from tests.functional.stream_fixtures import lambda_event, stored_event_records

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def ingest_live(client: Any, app_module: Any, aws: Any, clock: Any, times: list[int], retention_s: int) -> None:
    """Each event posted and counted at its own time, as a live feed is."""
    applied = 0
    for t in sorted(times):
        clock.now = t
        body = json.dumps({"counter": "kept", "time": t, "retention": retention_s})
        response = client.http.post("/events", headers={"Content-Type": "application/json"}, body=body)
        assert response.status_code == 201, response.json_body
        records = stored_event_records(aws.dynamodb)
        assert invoke(client, "on_event_records", lambda_event(records[applied:]))["state"]["counted"] == 1
        applied = len(records)


def get(client: Any, path: str) -> dict[str, Any]:
    response = client.http.get(path)
    assert response.status_code == 200, response.json_body
    return dict(response.json_body)


def test_given_a_day_that_outlives_its_hours_when_windows_are_aligned_differently_then_each_says_what_it_counted(
    client: Any, app_module: Any, aws: Any, clock: Any
) -> None:
    day_start = clock.now // DAY * DAY
    ingest_live(client, app_module, aws, clock, [day_start + 10 * HOUR], retention_s=3600)
    clock.now = day_start + DAY + 30 * MINUTE  # the hours expired at 12:00, the day keeps until tomorrow 01:00

    whole_day = get(client, f"/counters/kept?start={day_start}&end={day_start + DAY - MINUTE}")
    assert (whole_day["count"], whole_day["complete"]) == (1, True)

    from_nine = get(client, f"/counters/kept?start={day_start + 9 * HOUR}&end={clock.now}")
    assert from_nine["count"] == 0 and from_nine["complete"] is False
    # Read as hours (no whole day inside): only the last hour of yesterday is still kept.
    assert time_ms(from_nine["retained_from"]) == day_start + 23 * HOUR

    hourly = get(client, f"/counters/kept/histogram?start={day_start}&end={clock.now}&resolution=hour")
    assert hourly["complete"] is False and time_ms(hourly["retained_from"]) == day_start + 23 * HOUR
    assert sum(b["count"] for b in hourly["buckets"]) == 0
    daily = get(client, f"/counters/kept/histogram?start={day_start}&end={clock.now}&resolution=day")
    assert daily["complete"] is True and [b["count"] for b in daily["buckets"]] == [1, 0]


def test_given_events_and_time_passing_then_every_answer_counts_exactly_retained_from_to_end(
    client: Any, app_module: Any, aws: Any, clock: Any
) -> None:
    rng = random.Random(14)
    base = clock.now
    times = sorted(base - rng.randrange(3 * DAY) for _ in range(40))
    retention_s = 6 * 3600
    ingest_live(client, app_module, aws, clock, times, retention_s)

    for _ in range(25):
        clock.now = base + rng.randrange(2 * DAY)
        end = clock.now - rng.randrange(DAY)
        start = end - rng.randrange(1, 3 * DAY)
        answer = get(client, f"/counters/kept?start={start}&end={end}")
        retained_from = time_ms(answer["retained_from"]) if not answer["complete"] else start // MINUTE * MINUTE
        end_ms = time_ms(answer["end"])
        assert answer["count"] == sum(1 for t in times if retained_from <= t // MINUTE * MINUTE < end_ms), answer
        assert answer["complete"] == (retained_from <= start)
        for resolution in ("minute", "hour", "day"):
            if resolution == "minute" and end - start > DAY:
                continue
            series = get(client, f"/counters/kept/histogram?start={start}&end={end}&resolution={resolution}")
            cut = time_ms(series["retained_from"]) if not series["complete"] else time_ms(series["start"])
            for bucket in series["buckets"]:
                b = time_ms(bucket["start"])
                size = {"minute": MINUTE, "hour": HOUR, "day": DAY}[resolution]
                expected = sum(1 for t in times if b <= t < b + size) if b >= cut else 0
                assert bucket["count"] == expected, (resolution, bucket, series["complete"])
