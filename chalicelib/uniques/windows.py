"""The UTC quarter-hour, hour and day buckets of unique-count sketches, and the plan for reading
a range of minutes as the coarsest buckets wholly inside it (`cover`). Pure. Why, and what each
kind of range reads: docs/counting.md, "Unique counts in a time zone"."""

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
    """The buckets whose union is minutes [start, stop) (both on quarter hours), oldest first.
    Hour and quarter sketches before `first_live_hour` are no longer kept: a partial day there
    is read whole, from its day sketch (the answer then starts earlier and says so)."""
    if start % QUARTER_MINUTES or stop % QUARTER_MINUTES:
        raise ValueError("a range of unique counts starts and ends on a quarter hour")
    if stop <= start:
        raise ValueError("the range ends before it starts")
    day = RESOLUTION_MINUTES["day"]
    buckets: list[Bucket] = []
    for index in range(start // day, (stop - 1) // day + 1):
        low, high = max(start, index * day), min(stop, (index + 1) * day)
        if (low, high) == (index * day, (index + 1) * day) or low // RESOLUTION_MINUTES["hour"] < first_live_hour:
            buckets.append(Bucket("day", index))
        else:
            buckets += _finer(low, high)
    return buckets


def _finer(start: int, stop: int) -> list[Bucket]:
    """Minutes [start, stop) inside one day: whole hours, the quarters at either end."""
    hour = RESOLUTION_MINUTES["hour"]
    first, last = -(-start // hour), stop // hour  # the whole hours inside
    if first >= last:
        return _quarters(start, stop)
    return (
        _quarters(start, first * hour) + [Bucket("hour", h) for h in range(first, last)] + _quarters(last * hour, stop)
    )


def _quarters(start: int, stop: int) -> list[Bucket]:
    return [Bucket("quarter", q) for q in range(start // QUARTER_MINUTES, stop // QUARTER_MINUTES)]
