"""Bucket math and window decomposition, checked against brute force over raw timestamps."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings, strategies as st

from chalicelib import timebuckets
from chalicelib.timebuckets import Bucket, decompose, window_minutes

MINUTE = 60_000
# Around "now", with room for hour and day boundaries either side.
BASE_MINUTE = 29_391_000
times = st.integers(min_value=(BASE_MINUTE - 40 * 1440) * MINUTE, max_value=(BASE_MINUTE + 40 * 1440) * MINUTE)


def bucket_counts(event_times: list[int]) -> Counter[Bucket]:
    counts: Counter[Bucket] = Counter()
    for t in event_times:
        counts.update(timebuckets.buckets_for(t))
    return counts


def count_by_buckets(event_times: list[int], first: int, last: int) -> int:
    counts = bucket_counts(event_times)
    return sum(term.sign * counts[term.bucket] for term in decompose(first, last))


def brute_force(event_times: list[int], first: int, last: int) -> int:
    return sum(1 for t in event_times if first <= t // MINUTE <= last)


def test_given_event_time_when_bucketed_then_minute_hour_day_contain_it() -> None:
    t = 1_795_000_123_456
    minute, hour, day = timebuckets.buckets_for(t)
    for bucket in (minute, hour, day):
        assert bucket.start_ms <= t < bucket.end_ms
    assert (minute.resolution, hour.resolution, day.resolution) == ("minute", "hour", "day")
    assert hour.end_ms - hour.start_ms == 3_600_000 and day.end_ms - day.start_ms == 86_400_000


@settings(max_examples=300, deadline=None)
@given(
    event_times=st.lists(times, max_size=60),
    end=times,
    minutes=st.integers(min_value=1, max_value=30 * 1440),
)
def test_given_any_events_when_window_counted_from_buckets_then_equals_brute_force(
    event_times: list[int], end: int, minutes: int
) -> None:
    first, last = window_minutes(end, minutes)
    # Events near the window's edges are where a wrong decomposition shows.
    edges = [first * MINUTE - 1, first * MINUTE, (last + 1) * MINUTE - 1, (last + 1) * MINUTE]
    all_times = event_times + edges
    assert count_by_buckets(all_times, first, last) == brute_force(all_times, first, last)


@settings(max_examples=200, deadline=None)
@given(first=st.integers(BASE_MINUTE - 40 * 1440, BASE_MINUTE), length=st.integers(0, 30 * 1440))
def test_given_any_range_when_decomposed_then_every_minute_counted_exactly_once(first: int, length: int) -> None:
    last = first + length
    coverage: Counter[int] = Counter()
    for term in decompose(first, last):
        size = timebuckets.RESOLUTION_MINUTES[term.bucket.resolution]
        for minute in range(term.bucket.first_minute, term.bucket.first_minute + size):
            coverage[minute] += term.sign
    assert {m for m, c in coverage.items() if c} == set(range(first, last + 1))
    assert all(c in (0, 1) for c in coverage.values())
    keys = [term.bucket for term in decompose(first, last)]
    assert len(keys) == len(set(keys))


def test_given_every_end_minute_of_two_days_when_24h_window_decomposed_then_at_most_83_keys() -> None:
    sizes = [len(decompose(*window_minutes((BASE_MINUTE + m) * MINUTE, 1440))) for m in range(2 * 1440)]
    assert max(sizes) == 83
    # Aligned to the hour, a day is 24 hour keys or one day key.
    assert min(sizes) <= 24


def test_given_90_minute_window_when_decomposed_then_far_fewer_keys_than_minutes() -> None:
    sizes = [len(decompose(*window_minutes((BASE_MINUTE + m) * MINUTE, 90))) for m in range(120)]
    assert max(sizes) <= 32


def test_given_window_ending_before_start_when_decomposed_then_error() -> None:
    import pytest

    with pytest.raises(ValueError):
        decompose(10, 9)
    with pytest.raises(ValueError):
        window_minutes(0, 0)


def test_given_range_when_histogram_buckets_listed_then_they_cover_it() -> None:
    buckets = timebuckets.buckets_between(BASE_MINUTE + 30, BASE_MINUTE + 200, "hour")
    assert buckets[0].first_minute <= BASE_MINUTE + 30 < buckets[0].first_minute + 60
    assert buckets[-1].first_minute <= BASE_MINUTE + 200 < buckets[-1].first_minute + 60
    assert [b.index for b in buckets] == list(range(buckets[0].index, buckets[-1].index + 1))
