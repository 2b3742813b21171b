"""Counts, histograms and breakdowns in a time zone, against brute force: each event's local date
read through zoneinfo, on days of 23 and 25 hours and in +05:30, +05:45 and +12:45/+13:45 zones."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pytest

from tests.functional import work_meter
from tests.functional.helpers import invoke, post_events
from tests.functional.stream_fixtures import lambda_event, stored_event_records
from tests.local_time import calendar_dates

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
COUNTER = "orders"


def utc_ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp() * 1000)


# A zone and a now a few days after the days it is tested on (a change of offset among them).
CASES = {
    "new-york-25-hours": ("America/New_York", utc_ms(2026, 11, 3, 15, 7)),
    "new-york-23-hours": ("America/New_York", utc_ms(2026, 3, 10, 15, 7)),
    "kolkata": ("Asia/Kolkata", utc_ms(2026, 11, 3, 15, 7)),
    "kathmandu": ("Asia/Kathmandu", utc_ms(2026, 11, 3, 15, 7)),
    "chatham-spring": ("Pacific/Chatham", utc_ms(2026, 9, 29, 2, 7)),
}


def local_date(zone: ZoneInfo, t_ms: int) -> date:
    return datetime.fromtimestamp(t_ms / 1000, zone).date()


def midnights(zone: ZoneInfo, t_ms: int) -> list[int]:
    """The minutes around local midnights near t: where the tests put events on purpose."""
    out = []
    for m in range(t_ms // MINUTE - 1500, t_ms // MINUTE + 1500):
        if local_date(zone, m * MINUTE) != local_date(zone, (m - 1) * MINUTE):
            out += [(m - 1) * MINUTE, m * MINUTE]
    return out


def counted(client: Any, aws: Any, now: int, zone: ZoneInfo, seed: int = 3) -> list[tuple[int, str]]:
    """About 170 events over the 9 days before now (a quarter of them at local midnights, either
    side), with a dimension `kind`; stored and counted through the stream."""
    rng = random.Random(seed)
    times = [now - rng.randrange(9 * DAY) for _ in range(150)]
    for day in range(1, 9):
        times += midnights(zone, now - day * DAY)
    events = [(t, rng.choice(["a", "b", "c"])) for t in sorted(times)]
    posts = [{"counter": COUNTER, "time": t, "retention": 40 * 86400, "dimensions": {"kind": k}} for t, k in events]
    post_events(client, posts)
    invoke(client, "on_event_records", lambda_event(stored_event_records(aws.dynamodb)))
    return events


def get(client: Any, path: str, status: int = 200) -> Any:
    response = client.http.get(path)
    assert response.status_code == status, (path, response.json_body)
    return response.json_body


def start_of(zone: ZoneInfo, day: date) -> int:
    """Brute force: the first minute whose local date is `day`, searched minute by minute."""
    guess = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) // 60 - 15 * 60
    while local_date(zone, guess * MINUTE) < day:
        guess += 1
    return guess * MINUTE


def day_histogram(client: Any, zone: ZoneInfo, now: int, events: list[tuple[int, str]]) -> None:
    """Each local day of a day histogram counts the events of that local date."""
    start = now - 8 * DAY
    body = get(client, f"/counters/{COUNTER}/histogram?start={start}&end={now}&resolution=day&tz={quote(zone.key)}")
    assert body["tz"] == zone.key and body["complete"] is True
    days = [datetime.fromisoformat(b["start"]) for b in body["buckets"]]
    assert days[0].date() == local_date(zone, start) and days[-1].date() == local_date(zone, now)
    for bucket, moment in zip(body["buckets"], days):
        assert moment.time().hour == 0 and moment.utcoffset() == zone.utcoffset(moment.replace(tzinfo=None))
        expected = sum(1 for t, _ in events if local_date(zone, t) == moment.date())
        assert bucket["count"] == expected, bucket
    lengths = {d.date(): (b - d) for d, b in zip(days, days[1:])}
    if zone.key == "America/New_York" and date(2026, 11, 1) in lengths:
        assert lengths[date(2026, 11, 1)] == timedelta(hours=25)
    if zone.key == "America/New_York" and date(2026, 3, 8) in lengths:
        assert lengths[date(2026, 3, 8)] == timedelta(hours=23)


def hour_histogram(client: Any, zone: ZoneInfo, now: int, events: list[tuple[int, str]]) -> None:
    """Each local hour counts the events between its start and the next one's."""
    start = now - 3 * DAY
    body = get(client, f"/counters/{COUNTER}/histogram?start={start}&end={now}&resolution=hour&tz={quote(zone.key)}")
    starts = [int(datetime.fromisoformat(b["start"]).timestamp() * 1000) for b in body["buckets"]]
    stops = [*starts[1:], int(datetime.fromisoformat(body["end"]).timestamp() * 1000)]
    for bucket, low, high in zip(body["buckets"], starts, stops):
        assert bucket["count"] == sum(1 for t, _ in events if low <= t < high), bucket
        assert datetime.fromisoformat(bucket["start"]).minute in (0, 45)  # 45: Chatham's changes
    assert sum(b["count"] for b in body["buckets"]) == sum(1 for t, _ in events if starts[0] <= t < stops[-1])


def in_window(events: list[tuple[int, str]], low: int, high: int) -> int:
    """Events in minutes [low, high) by brute force (times in ms, compared at minute precision)."""
    return sum(1 for t, _ in events if low // MINUTE <= t // MINUTE < high // MINUTE)


CALENDAR_WINDOWS = ["today", "yesterday", "this_week", "last_week", "this_month", "last_month", "this_year"]


def calendar_windows(client: Any, zone: ZoneInfo, now: int, events: list[tuple[int, str]]) -> None:
    """Every calendar window counts from its first local midnight to the next period's (or now)."""
    for window in CALENDAR_WINDOWS:
        first, after = calendar_dates(window, local_date(zone, now))
        low = start_of(zone, first)
        high = now + MINUTE if after is None else start_of(zone, after)
        body = get(client, f"/counters/{COUNTER}?window={window}&tz={quote(zone.key)}")
        assert body["count"] == in_window(events, low, high), window
        assert datetime.fromisoformat(body["start"]).timestamp() * 1000 == low
        assert datetime.fromisoformat(body["start"]).utcoffset() == datetime.fromtimestamp(low / 1000, zone).utcoffset()


def calendar_breakdown(client: Any, zone: ZoneInfo, now: int, events: list[tuple[int, str]]) -> None:
    """A breakdown of last week counts each value's events of those local days."""
    first, after = calendar_dates("last_week", local_date(zone, now))
    low, high = start_of(zone, first), start_of(zone, after or first)
    body = get(client, f"/counters/{COUNTER}/breakdown?by=kind&window=last_week&tz={quote(zone.key)}")
    for kind in ("a", "b", "c"):
        expected = sum(1 for t, k in events if k == kind and low <= t < high)
        assert {v["value"]: v["count"] for v in body["values"]}.get(kind, 0) == expected
    assert body["others"]["count"] == 0


def today_compared(client: Any, zone: ZoneInfo, now: int, events: list[tuple[int, str]]) -> None:
    """Today so far against yesterday up to the same local time."""
    today = local_date(zone, now)
    body = get(client, f"/counters/{COUNTER}?window=today&tz={quote(zone.key)}&compare=previous_period")
    local_now = datetime.fromtimestamp(now / 1000, zone).replace(tzinfo=None, second=0, microsecond=0)
    same_time = (local_now - timedelta(days=1) + timedelta(minutes=1)).replace(tzinfo=zone)
    low, high = start_of(zone, today - timedelta(days=1)), int(same_time.timestamp() * 1000)
    assert body["previous"]["count"] == in_window(events, low, high)
    assert body["count"] == in_window(events, start_of(zone, today), now + MINUTE)
    assert "counter" not in body["previous"] and set(body["previous"]) >= {"count", "sums", "start", "end"}


def last_week_compared(client: Any, zone: ZoneInfo, now: int, events: list[tuple[int, str]]) -> None:
    """Last week by day against the week before, by day."""
    body = get(
        client,
        f"/counters/{COUNTER}/histogram?window=last_week&resolution=day&tz={quote(zone.key)}&compare=previous_period",
    )
    assert len(body["buckets"]) == len(body["previous"]["buckets"]) == 7
    for bucket in body["previous"]["buckets"]:
        day = datetime.fromisoformat(bucket["start"]).date()
        assert bucket["count"] == sum(1 for t, _ in events if local_date(zone, t) == day)
    assert datetime.fromisoformat(body["previous"]["end"]) == datetime.fromisoformat(body["start"])


@pytest.mark.parametrize("case", list(CASES))
def test_given_events_in_a_zone_when_read_by_local_days_hours_calendar_windows_and_comparisons_then_brute_force(
    client: Any, aws: Any, clock: Any, case: str
) -> None:
    name, clock.now = CASES[case]
    zone = ZoneInfo(name)
    events = counted(client, aws, clock.now, zone)
    for check in (
        day_histogram,
        hour_histogram,
        calendar_windows,
        calendar_breakdown,
        today_compared,
        last_week_compared,
    ):
        check(client, zone, clock.now, events)


def test_given_a_duration_window_when_compared_then_the_same_minutes_just_before(
    client: Any, aws: Any, clock: Any
) -> None:
    zone = ZoneInfo("Asia/Kathmandu")
    clock.now = utc_ms(2026, 11, 3, 15, 7)
    events = counted(client, aws, clock.now, zone)
    body = get(client, f"/counters/{COUNTER}?window=36h&tz=Asia/Kathmandu&compare=previous_period")
    first = clock.now // MINUTE * MINUTE - (36 * 60 - 1) * MINUTE
    assert body["count"] == in_window(events, first, clock.now + MINUTE)
    assert body["previous"]["count"] == in_window(events, first - 36 * HOUR, first)
    assert body["previous"]["end"] == body["start"] and body["start"].endswith("+05:45")


def test_given_events_a_year_apart_when_year_over_year_then_the_same_local_days_a_year_before(
    client: Any, aws: Any, clock: Any
) -> None:
    clock.now = utc_ms(2026, 11, 3, 15, 7)
    # Local 1 November 2026 (25 hours) and 2025 (24: clocks went back on the 2nd), at their
    # first and last minutes, and the minutes either side.
    times = [utc_ms(2025, 11, 1, 4), utc_ms(2025, 11, 2, 3, 59), utc_ms(2025, 11, 2, 4), utc_ms(2025, 11, 1, 3, 59)]
    times += [utc_ms(2026, 11, 1, 4), utc_ms(2026, 11, 2, 4, 59), utc_ms(2026, 11, 2, 5)]
    post_events(client, [{"counter": COUNTER, "time": t, "retention": 400 * 86400} for t in times])
    invoke(client, "on_event_records", lambda_event(stored_event_records(aws.dynamodb)))
    start, end = quote("2026-11-01T00:00:00-04:00"), quote("2026-11-01T23:59:00-05:00")
    body = get(client, f"/counters/{COUNTER}?start={start}&end={end}&tz=America/New_York&compare=year_over_year")
    assert (body["count"], body["previous"]["count"]) == (2, 2)
    assert body["previous"]["start"] == "2025-11-01T00:00:00-04:00"
    assert body["previous"]["end"] == "2025-11-02T00:00:00-04:00"


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("tz=Mars/Olympus", "not a known IANA time-zone name"),
        ("tz=europe/berlin", "did you mean Europe/Berlin?"),
        ("tz=", "IANA time-zone name"),
        ("window=fortnight", "window must be a duration"),
        ("window=today&start=1790000000000", "either window"),
        ("compare=last_year", "compare must be previous_period or year_over_year"),
    ],
)
@pytest.mark.parametrize("route", ["", "/histogram", "/breakdown?by=kind&"])
def test_given_bad_zone_window_or_compare_when_read_then_400_saying_why(
    client: Any, app_module: Any, route: str, query: str, says: str
) -> None:
    path = f"/counters/{COUNTER}{route}" + ("" if route.endswith("&") else "?") + query
    response = client.http.get(path)
    assert response.status_code == 400
    assert response.json_body["Code"] == "BadRequestError" and says in response.json_body["Message"]


def test_given_local_month_buckets_when_read_then_each_month_from_its_first_local_midnight(
    client: Any, aws: Any, clock: Any
) -> None:
    zone = ZoneInfo("Pacific/Chatham")
    clock.now = utc_ms(2026, 11, 3, 15, 7)
    edges = [start_of(zone, date(2026, m, 1)) for m in (9, 10, 11)]
    times = [t + d for t in edges for d in (-MINUTE, 0)] + [edges[0] + 5 * DAY]
    post_events(client, [{"counter": COUNTER, "time": t, "retention": 400 * 86400} for t in times])
    invoke(client, "on_event_records", lambda_event(stored_event_records(aws.dynamodb)))
    body = get(client, f"/counters/{COUNTER}/histogram?window=60d&resolution=month&tz=Pacific/Chatham")
    assert [(b["start"], b["count"]) for b in body["buckets"]] == [
        ("2026-09-01T00:00:00+12:45", 3),
        ("2026-10-01T00:00:00+13:45", 2),
        ("2026-11-01T00:00:00+13:45", 1),
    ]


def test_given_a_dense_local_day_series_when_read_then_one_query_of_its_hours_and_one_of_its_days(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock.now = utc_ms(2026, 11, 3, 15, 7)
    times = [clock.now - h * HOUR for h in range(1, 10 * 24)]  # every hour of 10 days holds an event
    post_events(client, [{"counter": COUNTER, "time": t, "retention": 40 * 86400} for t in times])
    invoke(client, "on_event_records", lambda_event(stored_event_records(aws.dynamodb)))
    meter = work_meter.install(aws, monkeypatch)
    body = get(client, f"/counters/{COUNTER}/histogram?window=9d&resolution=day&tz=Europe/Berlin")
    zone = ZoneInfo("Europe/Berlin")
    for bucket in body["buckets"]:
        day = datetime.fromisoformat(bucket["start"]).date()
        assert bucket["count"] == sum(1 for t in times if local_date(zone, t) == day)
    assert meter.calls == ["query", "query"]  # the hours, then the days: no key by key
    meter.reset()
    get(client, f"/counters/{COUNTER}/histogram?window=2d&resolution=day&tz=Europe/Berlin")
    assert meter.calls == ["batch_get_item"]  # 50 hours: fewer keys than a batch takes
