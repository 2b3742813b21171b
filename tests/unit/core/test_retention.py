"""The retention rule (core.timebuckets.kept, kept_from): which parts an answer may use."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import timebuckets
from chalicelib.core.timebuckets import Bucket

DAY_MINUTES = 1440


def test_given_an_hour_and_its_day_when_both_stored_with_one_retention_then_the_day_is_kept_longer() -> None:
    hour, day = Bucket("hour", 24 * 100 + 10), Bucket("day", 100)
    r = 3600
    now_s = hour.end_ms // 1000 + r  # the hour just expired
    assert not timebuckets.kept(hour, hour.end_ms // 1000 + r, r, now_s)
    assert timebuckets.kept(day, day.end_ms // 1000 + r, r, now_s)
    assert not timebuckets.kept(day, day.end_ms // 1000 + r, r, day.end_ms // 1000 + r)


def test_given_an_absent_bucket_then_it_is_kept_while_its_retention_would_keep_it() -> None:
    hour = Bucket("hour", 5000)
    assert timebuckets.kept(hour, None, 60, hour.end_ms // 1000 + 59)
    assert not timebuckets.kept(hour, None, 60, hour.end_ms // 1000 + 60)


@given(st.lists(st.booleans(), max_size=30))
def test_given_flags_then_kept_from_starts_the_longest_all_kept_suffix(flags: list[bool]) -> None:
    first = timebuckets.kept_from(flags)
    assert all(flags[first:])
    assert first == 0 or not flags[first - 1]


@given(
    first=st.integers(0, 400 * DAY_MINUTES),
    length=st.integers(1, 40 * DAY_MINUTES),
    retention_s=st.integers(60, 30 * 86400),
    lag_s=st.integers(0, 60 * 86400),
)
def test_given_one_retention_then_kept_parts_of_any_window_are_a_suffix_ending_at_the_window_end(
    first: int, length: int, retention_s: int, lag_s: int
) -> None:
    """With one retention, expiry grows with a part's end, so an answer never skips a gap:
    what it counts is exactly [retained_from, end)."""
    last = first + length - 1
    now_s = (last + 1) * 60 + lag_s
    parts = timebuckets.plan(first, last)
    flags = [timebuckets.kept(p.bucket, None, retention_s, now_s) for p in parts]
    cut = timebuckets.kept_from(flags)
    assert not any(flags[:cut])
