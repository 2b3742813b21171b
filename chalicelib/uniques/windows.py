"""The UTC quarter-hour, hour and day buckets of unique-count sketches, and the plan for reading a
range of minutes (`cover`). Pure. Why, and what each range reads: docs/counting.md, "Unique counts in a time zone"."""

from __future__ import annotations

from typing import Literal

from chalicelib.core import times
from chalicelib.core.timebuckets import RESOLUTION_MINUTES, Bucket

Level = Literal["quarter", "hour", "day"]  # a window's plan never reads minute sketches (uniques.api.recent)
LEVELS: tuple[Level, ...] = ("day", "hour", "quarter")  # coarsest first
QUARTER_MINUTES = RESOLUTION_MINUTES["quarter"]


def buckets_for(t_ms: int) -> list[Bucket]:
    """The day, hour and quarter-hour sketches an item seen at t_ms is added to."""
    minute = t_ms // times.MINUTE_MS
    return [Bucket(level, minute // RESOLUTION_MINUTES[level]) for level in LEVELS]


def widen(start: int, stop: int) -> tuple[int, int]:
    """Minutes [start, stop) widened to quarter hours, the finest buckets kept."""
    return start - start % QUARTER_MINUTES, -(-stop // QUARTER_MINUTES) * QUARTER_MINUTES


def cover(start: int, stop: int, first_live_hour: int) -> list[Bucket]:
    """The buckets whose union is minutes [start, stop) (both on quarter hours), oldest first; a partial
    day before `first_live_hour`, whose hours are no longer kept, as its whole day sketch."""
    if start % QUARTER_MINUTES or stop % QUARTER_MINUTES:
        raise ValueError("a range of unique counts starts and ends on a quarter hour")
    if stop <= start:
        raise ValueError("the range ends before it starts")
    buckets: list[Bucket] = []
    while start < stop:
        here = buckets_for(start * times.MINUTE_MS)  # day, hour, quarter
        fits = [bucket for bucket in here if bucket.first_minute == start and bucket.stop_minute <= stop]
        buckets.append(here[0] if start // RESOLUTION_MINUTES["hour"] < first_live_hour else fits[0])
        start = buckets[-1].stop_minute
    return buckets
