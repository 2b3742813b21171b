"""Unique counts in a time zone: local-day series, calendar windows and comparisons against
brute force (the distinct items of each local date, zoneinfo read directly), exact while small
and, beyond, equal to one sketch built from exactly the day's items."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import date, datetime
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import jsonschema
import pytest

from chalicelib.contract import schemas
from chalicelib.core import queues, times
from chalicelib.core.settings import Settings
from chalicelib.uniques import batches as uniques_batches
from chalicelib.uniques import sketches
from tests.conftest import ITEM_KEY
from tests.local_time import ZONE_CASES

SETTINGS = Settings()
P = sketches.precision_for(SETTINGS.uniques_error_rate)
KEY = ITEM_KEY.encode()
MINUTE_MS = 60_000


def apply(aws: Any, name: str, seen: list[tuple[str, int]], now_ms: int) -> None:
    """The visits as one message per distinct time, applied in batches of 100 by the handler's code."""
    by_time: dict[int, list[str]] = defaultdict(list)
    for item, t in seen:
        by_time[t].append(item)
    messages = [
        queues.Message(f"{name}-{t}", "", uniques_batches.message_body(name, sketches.item_hashes(KEY, found), t))
        for t, found in sorted(by_time.items())
    ]
    for start in range(0, len(messages), 100):
        uniques_batches.apply_messages(aws.dynamodb, SETTINGS, messages[start : start + 100], now_ms)


def get(client: Any, path: str, **params: Any) -> dict[str, Any]:
    response = client.http.get(f"{path}?{urlencode(params)}")
    assert response.status_code == 200, response.body
    answer: dict[str, Any] = response.json_body
    return answer


def local_date(zone: str, t_ms: int) -> date:
    return datetime.fromtimestamp(t_ms / 1000, ZoneInfo(zone)).date()


def one_sketch(found: set[str]) -> int:
    return sketches.estimate(sketches.from_hashes(P, sketches.item_hashes(KEY, sorted(found))))


def visits(now_ms: int, days: int, people: int, n: int, seed: int) -> list[tuple[str, int]]:
    """n visits by `people` visitors at 150 random minutes of the `days` before now, a third of
    them within 20 minutes of a UTC half hour, where the 30- and 45-minute zones' days start."""
    rng = random.Random(seed)
    minutes = []
    for _ in range(150):
        t = now_ms - rng.randrange(days * 86_400_000)
        if rng.random() < 0.33:
            t = t - t % (30 * MINUTE_MS) + rng.randrange(-20, 20) * MINUTE_MS
        minutes.append(min(t, now_ms))
    return [(f"v{rng.randrange(people)}", rng.choice(minutes)) for _ in range(n)]


@pytest.mark.parametrize(("zone", "now"), ZONE_CASES)
@pytest.mark.parametrize("people", [150, 2000])
def test_given_visitors_over_ten_days_when_a_local_day_series_is_read_then_each_day_is_its_items_union(
    client: Any, aws: Any, clock: Any, zone: str, now: str, people: int
) -> None:
    clock.now = times.parse(now)
    seen = visits(clock.now, 10, people, 6000, seed=people + len(zone))
    apply(aws, "zoned", seen, clock.now)
    answer = get(
        client,
        "/hyperloglog/zoned/histogram",
        tz=zone,
        resolution="day",
        start=times.iso(clock.now - 8 * 86_400_000),
        end=times.iso(clock.now),
    )
    assert answer["tz"] == zone and answer["complete"] is True and answer["additive"] is False
    by_day: dict[date, set[str]] = defaultdict(set)
    for item, t in seen:
        by_day[local_date(zone, t)].add(item)
    for bucket in answer["buckets"]:
        moment = datetime.fromisoformat(bucket["start"])
        assert (moment.hour, moment.minute) == (0, 0)
        found = by_day[moment.date()]
        assert bucket["cardinality"] == one_sketch(found), moment
        assert bucket["exact"] is (len(found) <= sketches.EXACT_LIMIT)
        if bucket["exact"]:
            assert bucket["cardinality"] == len(found)
    # 150 visitors: every day exact; 2,000: most days hold more than the exact sets keep
    assert any(not b["exact"] for b in answer["buckets"]) is (people > sketches.EXACT_LIMIT)
    # about 24 hour sketches a local day (one Query), plus four quarters where it starts off the hour
    days = len(answer["buckets"])
    assert answer["keys_read"] <= 26 * (days + 1) + 4 * (days + 1)


def test_given_the_25_and_23_hour_days_when_counted_then_each_holds_exactly_its_own_hours_visitors(
    client: Any, aws: Any, clock: Any
) -> None:
    zone = "America/New_York"
    for now, day in (("2026-11-03T12:00:00Z", "2026-11-01"), ("2026-03-10T12:00:00Z", "2026-03-08")):
        clock.now = times.parse(now)
        begin = int(datetime.fromisoformat(f"{day}T00:00:00").replace(tzinfo=ZoneInfo(zone)).timestamp() * 1000)
        # one new visitor every 30 minutes from 2 hours before the local day to 2 hours after it
        seen = [(f"{day}-{k}", begin + k * 30 * MINUTE_MS) for k in range(-4, 54)]
        apply(aws, f"dst.{day}", seen, clock.now)
        inside = {item for item, t in seen if local_date(zone, t).isoformat() == day}
        assert len(inside) in (46, 50)
        answer = get(
            client, f"/hyperloglog/dst.{day}/histogram", tz=zone, start=f"{day}T12:00:00Z", end=f"{day}T12:00:00Z"
        )
        (bucket,) = answer["buckets"]
        assert bucket["start"][:10] == day and bucket["cardinality"] == len(inside) and bucket["exact"] is True


@pytest.mark.parametrize("zone", ["Asia/Kolkata", "Asia/Kathmandu", "Pacific/Chatham", "America/New_York"])
def test_given_calendar_windows_when_counted_with_compare_then_today_and_yesterday_match_brute_force(
    client: Any, aws: Any, clock: Any, zone: str
) -> None:
    clock.now = times.parse("2026-11-18T11:06:40Z")
    seen = visits(clock.now, 4, 250, 900, seed=3)
    apply(aws, "cal", seen, clock.now)
    today = local_date(zone, clock.now)
    yesterday = date.fromordinal(today.toordinal() - 1)
    before = date.fromordinal(today.toordinal() - 2)

    def distinct(day: date, until: int | None = None) -> int:
        return len({i for i, t in seen if local_date(zone, t) == day and (until is None or t <= until)})

    answer = get(client, "/hyperloglog/cal", tz=zone, window="today", compare="previous_period")
    assert answer["cardinality"] == distinct(today) and answer["exact"] is True
    assert answer["start"] == datetime.combine(today, datetime.min.time(), ZoneInfo(zone)).isoformat()
    # yesterday up to the same local time (the quarter hour holding it: unique counts are per quarter)
    same_time = clock.now - 86_400_000
    stop = same_time - same_time % (15 * MINUTE_MS) + 15 * MINUTE_MS - 1
    assert answer["previous"]["cardinality"] == distinct(yesterday, stop)
    last = get(client, "/hyperloglog/cal", tz=zone, window="yesterday", compare="previous_period")
    assert last["cardinality"] == distinct(yesterday) and last["previous"]["cardinality"] == distinct(before)
    union = get(client, "/hyperloglog", names="cal,nobody", tz=zone, window="yesterday")
    assert union["cardinality"] == distinct(yesterday)


def test_given_year_over_year_when_counted_then_previous_is_the_same_local_day_a_year_before(
    client: Any, aws: Any, clock: Any
) -> None:
    zone = "Asia/Kathmandu"
    clock.now = times.parse("2026-11-18T11:06:40Z")
    start = datetime(2025, 11, 17, tzinfo=ZoneInfo(zone)).timestamp() * 1000  # 2025-11-16T18:15Z
    seen = [(f"old-{k}", int(start) + k * 15 * MINUTE_MS) for k in range(-3, 100)]  # 15 minutes apart
    apply(aws, "yoy", seen, clock.now)
    answer = get(client, "/hyperloglog/yoy", tz=zone, window="yesterday", compare="year_over_year")
    assert answer["cardinality"] == 0 and answer["previous"]["cardinality"] == 96  # 24 h of quarters
    assert answer["previous"]["start"] == "2025-11-17T00:00:00+05:45"


def test_given_a_bad_zone_resolution_or_compare_when_read_then_400(client: Any, aws: Any) -> None:
    for path, params in (
        ("/hyperloglog/x", {"tz": "Nowhere/Else", "window": "24h"}),
        ("/hyperloglog/x", {"compare": "previous_period"}),
        ("/hyperloglog/x", {"window": "today", "compare": "last_century"}),
        ("/hyperloglog/x/histogram", {"resolution": "minute"}),
        ("/hyperloglog", {"names": "x,y", "window": "someday"}),
    ):
        response = client.http.get(f"{path}?{urlencode(params)}")
        assert response.status_code == 400 and response.json_body["Code"] == "BadRequestError", params


def test_given_a_union_compared_when_read_then_the_answer_and_its_previous_are_as_the_document_says(
    client: Any,
) -> None:
    query = urlencode(
        {"names": "visitors,signups", "window": "today", "tz": "Europe/Berlin", "compare": "year_over_year"}
    )

    answer = client.http.get(f"/hyperloglog?{query}")

    assert answer.status_code == 200, answer.body
    assert set(answer.json_body["previous"]) >= {"cardinality", "start", "end"}
    assert "names" not in answer.json_body["previous"]
    jsonschema.validate(answer.json_body, schemas.compared(schemas.UNION_ANSWER))
