"""Windows of unique counts: the plan of day, hour and quarter sketches for hour-aligned and
local windows, and a window's answer against one sketch of exactly its items (pure: the back
end's targets, no storage)."""

from __future__ import annotations

import random
from dataclasses import replace
from zoneinfo import available_timezones

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.core import timebuckets, times, window_params, zones
from chalicelib.core.errors import ValidationError
from chalicelib.core.queues import Message
from chalicelib.core.settings import Settings
from chalicelib.uniques import batches, sketches, windows

SETTINGS = Settings()
P = sketches.precision_for(SETTINGS.uniques_error_rate)
KEY = b"unit-item-key-" + bytes(range(32))
NOW = 1_795_000_000_000
DAY = 1440
EVERYTHING_LIVE = -(10**9)


minutes = st.integers(1, 30 * DAY)
last_minutes = st.integers(NOW // 60_000 - 60 * DAY, NOW // 60_000)


def test_given_window_parameters_when_parsed_then_hour_aligned() -> None:
    now = 1_795_003_000_000  # 2026-11-18T08:36:40Z
    hour = now // 3_600_000
    assert window_params.hour_range({"window": "24h"}, now) == (hour - 23, hour)
    assert window_params.hour_range({"window": "1m"}, now) == (hour, hour)
    assert window_params.hour_range({"window": "61m"}, now) == (hour - 1, hour)
    start, end = "2026-11-17T10:30:00Z", "2026-11-17T12:00:00Z"
    first = times.parse(start) // 3_600_000  # the hour holding start: 10:00
    assert window_params.hour_range({"start": start, "end": end}, now) == (first, first + 2)


# Hour and quarter sketches kept 48 hours, as a stage may set them: older partial days read whole.
SHORT_HOURS = replace(SETTINGS, uniques_hour_retention_seconds=48 * 3600)


def simulate_back_end(
    settings: Settings, stream: list[tuple[str, int]], now_ms: int
) -> dict[timebuckets.Bucket | None, sketches.Sketch]:
    """What the handler stores for these (item, time) pairs, per target, with no storage."""
    store: dict[timebuckets.Bucket | None, sketches.Sketch] = {}
    for n, (item, t) in enumerate(stream):
        parsed = batches.parse_items(Message(f"m{n}", "", batches.message_body("w", sketches.item_hash(KEY, item), t)))
        for target in batches.targets(settings, parsed, now_ms):
            sketch = store.setdefault(target.bucket, sketches.empty(P))
            sketches.add_values(sketch, sketches.hash_values(parsed.hashes))
    return store


@settings(max_examples=40)
@given(
    st.integers(0, 2**32),
    st.sampled_from([0, 1, 50, 200, 300, 301, 1500]),
    last_minutes,
    minutes,
    st.integers(0, 72),
)
def test_given_items_over_35_days_when_any_window_is_read_then_it_equals_one_sketch_of_exactly_its_buckets_items(
    seed: int, distinct: int, end_minute: int, length: int, hours_later: int
) -> None:
    rng = random.Random(seed)
    written_at = NOW
    span_ms = 35 * DAY * 60_000
    stream = [(f"v{rng.randrange(distinct)}", written_at - rng.randrange(span_ms)) for _ in range(distinct * 2)]
    settings = SHORT_HOURS
    store = simulate_back_end(settings, stream, written_at)
    read_at = written_at + hours_later * 3_600_000  # hour sketches written then may have expired since
    end_minute = min(end_minute, read_at // 60_000)
    first_hour, last_hour = timebuckets.hours_ending(end_minute, length)
    first_live = timebuckets.first_live_index("hour", read_at, settings.uniques_hour_retention_seconds)
    plan = windows.cover(first_hour * 60, (last_hour + 1) * 60, first_live)
    live = [
        store[b]
        for b in plan
        if b in store and timebuckets.expires_at_s(b, batches.retention_s(settings, b.resolution)) > read_at // 1000
    ]
    answer = sketches.merge(live, P)
    start, end = plan[0].start_ms, plan[-1].end_ms
    inside = [item for item, t in stream if start <= t < end]
    one = sketches.from_hashes(P, sketches.item_hashes(KEY, inside))
    assert answer == one
    assert sketches.estimate(answer) == sketches.estimate(one)
    if len(set(inside)) <= sketches.EXACT_LIMIT:
        assert sketches.estimate(answer) == len(set(inside))


def test_given_item_older_than_the_hour_retention_when_applied_then_only_day_and_all_time_written() -> None:
    short = replace(SETTINGS, uniques_hour_retention_seconds=3600)
    old = batches.parse_items(
        Message("m", "", batches.message_body("w", sketches.item_hash(KEY, "x"), NOW - 3 * 3_600_000))
    )
    assert [t.bucket.resolution if t.bucket else "all" for t in batches.targets(short, old, NOW)] == ["all", "day"]
    recent = batches.parse_items(Message("m", "", batches.message_body("w", sketches.item_hash(KEY, "x"), NOW)))
    written = [t.bucket.resolution if t.bucket else "all" for t in batches.targets(short, recent, NOW)]
    assert written == ["all", "day", "hour", "quarter"]
    ancient = batches.parse_items(
        Message("m", "", batches.message_body("w", sketches.item_hash(KEY, "x"), NOW - 500 * 86_400_000))
    )
    assert [t.bucket for t in batches.targets(short, ancient, NOW)] == [None]


def test_given_items_that_ask_for_minutes_when_applied_then_their_minute_too_for_an_hour() -> None:
    def written(ago_ms: int, minute: bool) -> list[str]:
        body = batches.message_body("w", sketches.item_hash(KEY, "x"), NOW - ago_ms, minute)
        found = batches.targets(SETTINGS, batches.parse_items(Message("m", "", body)), NOW)
        return [t.bucket.resolution if t.bucket else "all" for t in found]

    assert written(0, minute=False) == ["all", "day", "hour", "quarter"]
    assert written(0, minute=True) == ["all", "day", "hour", "quarter", "minute"]
    assert written(2 * 3_600_000, minute=True) == ["all", "day", "hour", "quarter"]  # its minute no longer kept


@pytest.mark.parametrize("flag", ["yes", 1, None, []])
def test_given_a_minute_flag_that_is_not_a_boolean_when_parsed_then_refused(flag: object) -> None:
    import json

    body = json.loads(batches.message_body("w", sketches.item_hash(KEY, "x"), NOW)) | {"minute": flag}
    with pytest.raises(ValidationError):
        batches.parse_items(Message("m", "", json.dumps(body)))


def minutes_of(bucket: timebuckets.Bucket) -> range:
    return range(bucket.first_minute, bucket.stop_minute)


quarters = st.integers(NOW // 60_000 // 15 - 60 * 96, NOW // 60_000 // 15)


@given(quarters, st.integers(1, 31 * 96))
def test_given_any_range_on_quarter_hours_when_covered_then_its_minutes_exactly_once_in_few_sketches(
    first_quarter: int, length: int
) -> None:
    start, stop = first_quarter * 15, (first_quarter + length) * 15
    plan = windows.cover(start, stop, EVERYTHING_LIVE)
    assert [m for b in plan for m in minutes_of(b)] == list(range(start, stop))
    # whole days inside, at most 23 hours and 3 quarters at each end
    assert len(plan) <= (stop - start) // DAY + 2 * (23 + 3)
    assert sum(b.resolution == "quarter" for b in plan) <= 6


def test_given_a_range_off_the_quarter_hours_when_covered_then_refused_and_widen_gives_the_quarters_holding_it() -> (
    None
):
    try:
        windows.cover(7, 60, EVERYTHING_LIVE)
    except ValueError:
        pass
    else:
        raise AssertionError("a range off the quarter hours was covered")
    assert windows.widen(7, 61) == (0, 75)
    assert windows.widen(15, 60) == (15, 60)


ZONES = ["America/New_York", "Asia/Kolkata", "Asia/Kathmandu", "Pacific/Chatham", "Australia/Eucla", "UTC"]


@pytest.mark.parametrize("zone_name", ZONES)
def test_given_every_local_day_of_2026_when_covered_then_exact_with_at_most_25_hours_and_4_quarters(
    zone_name: str,
) -> None:
    zone = zones.parse(zone_name)
    first = times.parse("2026-01-01T00:00:00Z") // 60_000
    days = zones.buckets(zone, first, first + 365 * DAY, "day")
    for day in days:
        plan = windows.cover(day.first_minute, day.last_minute + 1, EVERYTHING_LIVE)
        assert [m for b in plan for m in minutes_of(b)] == list(range(day.first_minute, day.last_minute + 1))
        hours = sum(b.resolution == "hour" for b in plan)
        quarters_read = sum(b.resolution == "quarter" for b in plan)
        assert (hours, quarters_read) <= (25, 4) and quarters_read <= 4
        if zone_name == "UTC":
            assert plan == [timebuckets.Bucket("day", day.first_minute // DAY)]
        if zone_name == "America/New_York":
            assert quarters_read == 0 and hours == (day.last_minute + 1 - day.first_minute) // 60


def test_given_every_zone_when_its_offsets_since_2020_are_read_then_all_lie_on_quarter_hours() -> None:
    """Why a quarter hour is fine enough: no zone's local midnight since 2020 falls between them."""
    first = times.parse("2020-01-01T00:00:00Z") // 60_000
    for name in sorted(available_timezones()):
        zone = zones.parse(name)
        for minute in range(first, first + 8 * 366 * DAY, 30 * DAY):
            assert zones.offset_minutes(zone, minute) % 15 == 0, name
