"""Time buckets (a level and its index since the epoch) of counters, views and unique counts, the
plan for reading a counter's window and when a bucket expires. Pure. How a window is read:
docs/design.md, "Windowed counts"; what an answer counts when a part has expired:
docs/counting.md, "Retention"."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from chalicelib.core import times

MINUTE_MS = times.MINUTE_MS
Level = Literal["minute", "quarter", "hour", "day", "block"]
Resolution = Literal["minute", "hour", "day"]  # a counter's levels
BLOCK_DAYS = 32

RESOLUTION_MINUTES: dict[str, int] = {"minute": 1, "quarter": 15, "hour": 60, "day": 1440, "block": 1440 * BLOCK_DAYS}
DAY_MINUTES = 1440


def day_of_hour(hour_index: int) -> int:
    return hour_index // 24


@dataclass(frozen=True, order=True)
class Bucket:
    resolution: Level
    index: int  # bucket number since the epoch at this resolution

    @property
    def first_minute(self) -> int:
        return self.index * RESOLUTION_MINUTES[self.resolution]

    @property
    def stop_minute(self) -> int:
        """Exclusive."""
        return (self.index + 1) * RESOLUTION_MINUTES[self.resolution]

    @property
    def start_ms(self) -> int:
        return self.first_minute * MINUTE_MS

    @property
    def end_ms(self) -> int:
        """Exclusive end of the bucket, epoch milliseconds."""
        return self.stop_minute * MINUTE_MS


@dataclass(frozen=True)
class Part:
    """One item read for a window: a whole bucket, or some minutes of an hour bucket."""

    bucket: Bucket
    minutes: tuple[int, int] | None = None  # first and last minute-of-hour, inclusive


def minute_of(t_ms: int) -> int:
    return t_ms // MINUTE_MS


def minute_of_hour(t_ms: int) -> int:
    return minute_of(t_ms) % 60


def buckets_for(t_ms: int) -> tuple[Bucket, Bucket]:
    """The hour and day buckets an event at t_ms is counted in (its minute lives in the hour)."""
    minute = minute_of(t_ms)
    return Bucket("hour", minute // 60), Bucket("day", minute // 1440)


def window_minutes(end_ms: int, minutes: int) -> tuple[int, int]:
    """[first, last] minute indexes of a window of `minutes` ending at end_ms (inclusive)."""
    if minutes < 1:
        raise ValueError("a window is at least one minute long")
    last = minute_of(end_ms)
    return last - minutes + 1, last


def plan(first_minute: int, last_minute: int) -> list[Part]:
    """The items, and the minutes within them, whose counts add up to minutes first..last."""
    if last_minute < first_minute:
        raise ValueError("the window ends before it starts")
    start, stop = first_minute, last_minute + 1  # half-open from here on
    first_day, stop_day = -(-start // 1440), stop // 1440
    if first_day >= stop_day:
        return _hour_parts(start, stop)
    return (
        _hour_parts(start, first_day * 1440)
        + [Part(Bucket("day", d)) for d in range(first_day, stop_day)]
        + _hour_parts(stop_day * 1440, stop)
    )


def _hour_parts(start: int, stop: int) -> list[Part]:
    """Minutes [start, stop) as hour items: whole hours, and the partial hours at either end."""
    parts: list[Part] = []
    while start < stop:
        hour = start // 60
        end = min(stop, (hour + 1) * 60)
        minutes = None if end - start == 60 else (start - hour * 60, end - 1 - hour * 60)
        parts.append(Part(Bucket("hour", hour), minutes))
        start = end
    return parts


def bucket_count(first_minute: int, last_minute: int, resolution: Resolution) -> int:
    """How many buckets `buckets_between` would build, known before building any."""
    size = RESOLUTION_MINUTES[resolution]
    return max(0, last_minute // size - first_minute // size + 1)


def buckets_between(first_minute: int, last_minute: int, resolution: Resolution) -> list[Bucket]:
    """Every bucket at `resolution` that overlaps minutes first..last (for histograms)."""
    size = RESOLUTION_MINUTES[resolution]
    return [Bucket(resolution, i) for i in range(first_minute // size, last_minute // size + 1)]


# -- hour-aligned windows (unique counts: a sketch cannot be split into minutes) ---------------
# Their plan of day, hour and quarter sketches is uniques/windows.py.

HOUR_MINUTES = RESOLUTION_MINUTES["hour"]


def hours_ending(last_minute: int, minutes: int) -> tuple[int, int]:
    """A window of `minutes` ending at `last_minute`, hour-aligned: the ceil(minutes / 60) hours
    up to and including the hour holding last_minute (a 24-hour window is 24 hours)."""
    if minutes < 1:
        raise ValueError("a window is at least one minute long")
    last = last_minute // HOUR_MINUTES
    return last - -(-minutes // HOUR_MINUTES) + 1, last


def first_live_index(resolution: Resolution, now_ms: int, retention_s: int) -> int:
    """The oldest bucket still kept at now_ms when a bucket lives until its end plus retention_s."""
    return (now_ms // 1000 - retention_s) // (RESOLUTION_MINUTES[resolution] * 60)


# -- when a bucket expires (`expires_at`, DynamoDB's TTL attribute), and what a read may use ------


def expires_at_s(bucket: Bucket, retention_s: int) -> int:
    """Epoch seconds when a bucket kept for retention_s after its end expires."""
    return bucket.end_ms // 1000 + retention_s


def live(bucket: Bucket, retention_s: int, now_ms: int) -> bool:
    """Whether a bucket kept for retention_s has not expired yet: worth writing to."""
    return expires_at_s(bucket, retention_s) * 1000 > now_ms


def kept(bucket: Bucket, stored_expiry_s: int | None, retention_s: int, now_s: int) -> bool:
    """Whether a bucket's counts may be used now: its stored expiry, or, when it has none (absent:
    nothing counted, or already deleted), the expiry that retention_s would have given it."""
    expiry = expires_at_s(bucket, retention_s) if stored_expiry_s is None else stored_expiry_s
    return expiry > now_s


def kept_from(flags: Sequence[bool]) -> int:
    """Index of the first part of the suffix in which every part is kept (len if the last is not)."""
    index = len(flags)
    while index > 0 and flags[index - 1]:
        index -= 1
    return index


def series(
    buckets: Sequence[Bucket], values: Callable[[Bucket], dict[str, Any]], label: Callable[[int], str] = times.iso
) -> dict[str, Any]:
    """A histogram's `start`, `end` and `buckets` (each its `start` and `values(bucket)`), oldest
    first: the one shape of every series; `label` writes a time (epoch ms)."""
    return {
        "start": label(buckets[0].start_ms),
        "end": label(buckets[-1].end_ms),
        "buckets": [{"start": label(b.start_ms), **values(b)} for b in buckets],
    }


# What a windowed answer says when a part is not kept; each capability may say it its own way.
RETAINED_MESSAGE = "the window starts before what is retained: the answer covers retained_from to end"


def completeness(complete: bool, retained_from_ms: int, message: str | None = RETAINED_MESSAGE) -> dict[str, Any]:
    """`complete`, else `retained_from` and, unless None, a `message`: docs/design.md, "Window parameters"."""
    if complete:
        return {"complete": True}
    answer: dict[str, Any] = {"complete": False, "retained_from": times.iso(retained_from_ms)}
    return answer if message is None else {**answer, "message": message}
