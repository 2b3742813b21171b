"""Bucket math and window plans, checked against brute force over raw timestamps."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.core import timebuckets
from chalicelib.core.timebuckets import Bucket, plan, window_minutes

MINUTE = 60_000
# Around "now", with room for hour and day boundaries either side.
BASE_MINUTE = 29_391_000
times = st.integers(min_value=(BASE_MINUTE - 40 * 1440) * MINUTE, max_value=(BASE_MINUTE + 40 * 1440) * MINUTE)


def stored_counts(event_times: list[int]) -> tuple[Counter[Bucket], Counter[tuple[int, int]]]:
    """What the counts table would hold: bucket totals, and per-minute counts of each hour."""
    totals: Counter[Bucket] = Counter()
    minutes: Counter[tuple[int, int]] = Counter()
    for t in event_times:
        hour, day = timebuckets.buckets_for(t)
        totals.update([hour, day])
        minutes[(hour.index, timebuckets.minute_of_hour(t))] += 1
    return totals, minutes


def count_by_plan(event_times: list[int], first: int, last: int) -> int:
    totals, minutes = stored_counts(event_times)
    total = 0
    for part in plan(first, last):
        if part.minutes is None:
            total += totals[part.bucket]
        else:
            total += sum(minutes[(part.bucket.index, m)] for m in range(part.minutes[0], part.minutes[1] + 1))
    return total


def brute_force(event_times: list[int], first: int, last: int) -> int:
    return sum(1 for t in event_times if first <= t // MINUTE <= last)


def test_given_event_time_when_bucketed_then_hour_and_day_contain_it() -> None:
    t = 1_795_000_123_456
    hour, day = timebuckets.buckets_for(t)
    for bucket in (hour, day):
        assert bucket.start_ms <= t < bucket.end_ms
    assert (hour.resolution, day.resolution) == ("hour", "day")
    assert hour.end_ms - hour.start_ms == 3_600_000 and day.end_ms - day.start_ms == 86_400_000
    assert (
        hour.start_ms + timebuckets.minute_of_hour(t) * MINUTE
        <= t
        < hour.start_ms + (timebuckets.minute_of_hour(t) + 1) * MINUTE
    )


@settings(max_examples=300)
@given(
    event_times=st.lists(times, max_size=60),
    end=times,
    minutes=st.integers(min_value=1, max_value=30 * 1440),
)
def test_given_any_events_when_window_counted_from_plan_then_equals_brute_force(
    event_times: list[int], end: int, minutes: int
) -> None:
    first, last = window_minutes(end, minutes)
    # Events at the window's edges are where a wrong plan shows.
    edges = [first * MINUTE - 1, first * MINUTE, (last + 1) * MINUTE - 1, (last + 1) * MINUTE]
    all_times = event_times + edges
    assert count_by_plan(all_times, first, last) == brute_force(all_times, first, last)


@settings(max_examples=300)
@given(first=st.integers(BASE_MINUTE - 40 * 1440, BASE_MINUTE), length=st.integers(0, 30 * 1440))
def test_given_any_range_when_planned_then_every_minute_read_exactly_once_from_distinct_items(
    first: int, length: int
) -> None:
    last = first + length
    coverage: Counter[int] = Counter()
    parts = plan(first, last)
    for part in parts:
        if part.minutes is None:
            size = timebuckets.RESOLUTION_MINUTES[part.bucket.resolution]
            coverage.update(range(part.bucket.first_minute, part.bucket.first_minute + size))
        else:
            coverage.update(
                range(part.bucket.first_minute + part.minutes[0], part.bucket.first_minute + part.minutes[1] + 1)
            )
    assert set(coverage) == set(range(first, last + 1))
    assert set(coverage.values()) == {1}
    assert len({p.bucket for p in parts}) == len(parts)
    assert len(parts) <= 100  # one BatchGetItem for any window up to 30 days


def test_given_every_end_minute_of_two_days_when_24h_window_planned_then_at_most_25_items() -> None:
    sizes = [len(plan(*window_minutes((BASE_MINUTE + m) * MINUTE, 1440))) for m in range(2 * 1440)]
    assert max(sizes) == 25
    assert min(sizes) == 1  # aligned to a UTC day: one day item


def test_given_90_minute_window_when_planned_then_at_most_three_items() -> None:
    assert max(len(plan(*window_minutes((BASE_MINUTE + m) * MINUTE, 90))) for m in range(120)) == 3


def test_given_window_ending_before_start_when_planned_then_error() -> None:
    with pytest.raises(ValueError):
        plan(10, 9)
    with pytest.raises(ValueError):
        window_minutes(0, 0)


def test_given_range_when_histogram_buckets_listed_then_they_cover_it() -> None:
    buckets = timebuckets.buckets_between(BASE_MINUTE + 30, BASE_MINUTE + 200, "hour")
    assert buckets[0].first_minute <= BASE_MINUTE + 30 < buckets[0].first_minute + 60
    assert buckets[-1].first_minute <= BASE_MINUTE + 200 < buckets[-1].first_minute + 60
    assert [b.index for b in buckets] == list(range(buckets[0].index, buckets[-1].index + 1))


def test_given_a_window_cut_by_retention_then_every_answer_says_where_it_starts_the_same_way() -> None:
    assert timebuckets.completeness(True, 0) == {"complete": True}
    cut = timebuckets.completeness(False, 1_700_000_040_000)
    assert cut == {
        "complete": False,
        "retained_from": "2023-11-14T22:14:00.000Z",
        "message": timebuckets.RETAINED_MESSAGE,
    }
    assert timebuckets.completeness(False, 1_700_000_040_000, "views kept from")["message"] == "views kept from"
    assert "message" not in timebuckets.completeness(False, 1_700_000_040_000, None)


def test_given_buckets_then_a_series_spans_them_and_gives_each_its_start_and_values() -> None:
    buckets = timebuckets.buckets_between(29_390_400, 29_390_400 + 3 * 1440 - 1, "day")
    answer = timebuckets.series(buckets, lambda b: {"index": b.index})
    assert answer["start"] == "2025-11-18T00:00:00.000Z" and answer["end"] == "2025-11-21T00:00:00.000Z"
    assert answer["buckets"] == [
        {"start": f"2025-11-{18 + i}T00:00:00.000Z", "index": bucket.index} for i, bucket in enumerate(buckets)
    ]
