"""GET /views and GET /views/top in a time zone: local-day series, calendar windows and
comparisons, each against a brute-force count of the views by their local date (zoneinfo read
directly, not through the app's zone module)."""

from __future__ import annotations

import random
from collections import Counter
from datetime import date, datetime
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import pytest

from chalicelib.core import times
from chalicelib.views.validation import View
from tests.functional.helpers import deliver_views
from tests.local_time import ZONE_CASES

URL = "https://blog.example/zones"
MINUTE_MS = 60_000


def get(client: Any, **params: Any) -> dict[str, Any]:
    response = client.http.get("/views?" + urlencode({"url": URL, **params}))
    assert response.status_code == 200, response.body
    answer: dict[str, Any] = response.json_body
    return answer


def local_date(zone: str, t_ms: int) -> date:
    return datetime.fromtimestamp(t_ms / 1000, ZoneInfo(zone)).date()


def spread(aws: Any, now_ms: int, days: int, n: int, seed: int) -> list[int]:
    """n views of URL at random minutes of the `days` before now, applied in batches of 50 (so
    some minutes move into bucket items and some stay pending); their times."""
    rng = random.Random(seed)
    stamps = sorted(now_ms - rng.randrange(days * 86_400_000) for _ in range(n))
    for start in range(0, n, 50):
        views = [View(URL, t, f"c{start + i}") for i, t in enumerate(stamps[start : start + 50])]
        deliver_views(aws, views, now_ms)
    return stamps


@pytest.mark.parametrize(("zone", "now"), ZONE_CASES)
def test_given_views_over_two_weeks_when_a_local_day_series_is_read_then_each_day_equals_the_brute_force_count(
    client: Any, aws: Any, clock: Any, zone: str, now: str
) -> None:
    clock.now = times.parse(now)
    stamps = spread(aws, clock.now, 12, 600, seed=len(zone))
    start = times.iso(clock.now - 10 * 86_400_000)
    answer = get(client, tz=zone, resolution="day", start=start, end=times.iso(clock.now))
    assert answer["tz"] == zone and answer["complete"] is True
    first = date.fromisoformat(answer["buckets"][0]["start"][:10])
    last = date.fromisoformat(answer["buckets"][-1]["start"][:10])
    expected = Counter(local_date(zone, t) for t in stamps if first <= local_date(zone, t) <= last)
    got = {date.fromisoformat(b["start"][:10]): b["views"] for b in answer["buckets"]}
    assert got == {d: expected.get(d, 0) for d in got}
    assert len(got) == (last - first).days + 1 and sum(got.values()) == answer["views"]
    # each bucket starts at local midnight, labelled with its offset
    for bucket in answer["buckets"]:
        moment = datetime.fromisoformat(bucket["start"])
        assert (moment.hour, moment.minute) == (0, 0)
        assert moment.utcoffset() == moment.astimezone(ZoneInfo(zone)).utcoffset()
    # 11 or 12 local days share their UTC day items: about one item a day (two where a day
    # starts off the hour, whose first and last hours are hour items), plus the counter
    assert answer["keys_read"] <= 2 * len(got) + 3


def test_given_the_25_and_23_hour_days_when_read_then_their_buckets_hold_25_and_23_hours_of_views(
    client: Any, aws: Any, clock: Any
) -> None:
    zone = "America/New_York"
    for now, day, hours in (("2026-11-03T12:00:00Z", "2026-11-01", 25), ("2026-03-10T12:00:00Z", "2026-03-08", 23)):
        clock.now = times.parse(now)
        begin = datetime.fromisoformat(f"{day}T00:00:00").replace(tzinfo=ZoneInfo(zone)).timestamp() * 1000
        # one view every 30 minutes from 2 hours before the local day to 2 hours after it
        stamps = [int(begin) + k * 30 * MINUTE_MS for k in range(-4, 2 * hours + 4)]
        deliver_views(aws, [View(URL, t, f"{day}-{t}") for t in stamps], clock.now)
        answer = get(client, tz=zone, resolution="day", start=f"{day}T12:00:00Z", end=f"{day}T12:00:00Z")
        (bucket,) = answer["buckets"]
        assert bucket["start"][:10] == day and bucket["views"] == 2 * hours


@pytest.mark.parametrize("zone", ["Asia/Kolkata", "Asia/Kathmandu", "Pacific/Chatham", "America/New_York"])
def test_given_calendar_windows_when_read_with_compare_then_today_yesterday_and_this_week_match_brute_force(
    client: Any, aws: Any, clock: Any, zone: str
) -> None:
    clock.now = times.parse("2026-11-18T11:06:40Z")
    stamps = spread(aws, clock.now, 16, 500, seed=7)
    today = local_date(zone, clock.now)
    by_day = Counter(local_date(zone, t) for t in stamps)
    for window, days, before in (
        ("today", [today], [date.fromordinal(today.toordinal() - 1)]),
        ("yesterday", [date.fromordinal(today.toordinal() - 1)], [date.fromordinal(today.toordinal() - 2)]),
    ):
        answer = get(client, tz=zone, window=window, compare="previous_period")
        if window == "today":  # today so far against yesterday up to the same time
            same_time = clock.now - 86_400_000
            expected_before = sum(1 for t in stamps if local_date(zone, t) == before[0] and t <= same_time)
        else:
            expected_before = sum(by_day[d] for d in before)
        assert answer["views"] == sum(by_day[d] for d in days), window
        assert answer["previous"]["views"] == expected_before, window
        assert datetime.fromisoformat(answer["start"]).date() == days[0]
    monday = date.fromordinal(today.toordinal() - today.weekday())
    week = get(client, tz=zone, window="this_week")
    assert week["views"] == sum(n for d, n in by_day.items() if d >= monday)


def test_given_an_unknown_zone_or_a_compare_without_window_when_read_then_400_and_nothing_read(
    client: Any, aws: Any, clock: Any
) -> None:
    for params in ({"tz": "Mars/Olympus", "window": "24h"}, {"compare": "previous_period"}, {"resolution": "day"}):
        response = client.http.get("/views?" + urlencode({"url": URL, **params}))
        assert response.status_code == 400 and response.json_body["Code"] == "BadRequestError", params
    response = client.http.get("/views?" + urlencode({"url": URL, "window": "24h", "resolution": "minute"}))
    assert response.status_code == 400


def test_given_views_when_top_urls_of_a_local_today_then_counted_from_local_midnight_not_the_utc_hour(
    client: Any, aws: Any, clock: Any
) -> None:
    zone = "Asia/Kolkata"  # local midnight is 18:30 UTC
    clock.now = times.parse("2026-11-18T11:06:40Z")
    midnight = times.parse("2026-11-17T18:30:00Z")
    views = [View("https://a.example/x", midnight - 10 * MINUTE_MS, "before")]  # 18:20 UTC: yesterday
    views += [View("https://a.example/x", midnight + k * MINUTE_MS, f"x{k}") for k in range(3)]
    views += [View("https://a.example/y", midnight - k * MINUTE_MS - 1, f"y{k}") for k in range(1, 6)]
    deliver_views(aws, views, clock.now)
    response = client.http.get("/views/top?" + urlencode({"window": "today", "tz": zone, "compare": "previous_period"}))
    assert response.status_code == 200, response.body
    answer = response.json_body
    assert answer["urls"] == [{"url": "https://a.example/x", "views": 3}]
    assert answer["start"] == "2026-11-18T00:00:00+05:30" and answer["exact"] is True
    assert answer["previous"]["urls"] == []  # yesterday up to 16:36 local: no view yet
    response = client.http.get("/views/top?" + urlencode({"window": "yesterday", "tz": zone}))
    assert response.json_body["urls"] == [
        {"url": "https://a.example/y", "views": 5},
        {"url": "https://a.example/x", "views": 1},
    ]
