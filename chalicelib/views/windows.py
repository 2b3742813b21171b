"""View counts per hour, day and 32-day block, and the plan for reading a range of minutes. Pure. The
items: docs/design.md, "Keys" under Exact view counters; what a range reads, "Ranged reads"."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from chalicelib.core import times, window_params
from chalicelib.core.timebuckets import RESOLUTION_MINUTES, Bucket

MINUTE_MS = times.MINUTE_MS
Level = Literal["hour", "day", "block"]
LEVELS: tuple[Level, ...] = ("hour", "day", "block")  # finest first
# The finer buckets an item counts inside it: the attribute prefix and the size in minutes.
INNER: dict[str, tuple[str, int]] = {"hour": ("m", 1), "day": ("h", 60), "block": ("d", 1440)}
# The most items a range of up to MAX_RANGE_DAYS reads (tests/unit/views/test_view_windows.py checks it).
MAX_RANGE_DAYS = window_params.MAX_WINDOW_DAYS
MAX_PARTS = 18


@dataclass(frozen=True)
class Part:
    """One item read for a range: a whole bucket, or some of the finer buckets inside it."""

    span: Bucket
    inner: tuple[int, int] | None = None  # first and last inner bucket, inclusive

    @property
    def start_minute(self) -> int:
        return self.span.first_minute + (0 if self.inner is None else self.inner[0] * INNER[self.span.resolution][1])


def inner_attribute(level: str, position: int) -> str:
    """The attribute of an item holding the count of its inner bucket at `position`."""
    return f"{INNER[level][0]}{position:02d}"


def spans_of(minute: int) -> list[tuple[Bucket, int]]:
    """The buckets a view in `minute` is counted in, each with the inner bucket it falls in."""
    spans = [Bucket(level, minute // RESOLUTION_MINUTES[level]) for level in LEVELS]
    return [(span, (minute - span.first_minute) // INNER[span.resolution][1]) for span in spans]


@dataclass
class Increment:
    """Views added to one bucket, in all and per inner bucket."""

    n: int = 0
    inner: Counter[int] = field(default_factory=Counter)

    def add(self, position: int, n: int) -> None:
        self.n += n
        self.inner[position] += n


def increments(times_ms: Iterable[int]) -> dict[Bucket, Increment]:
    """What counting views at these times adds to each bucket."""
    result: dict[Bucket, Increment] = {}
    for t_ms in times_ms:
        for span, position in spans_of(t_ms // MINUTE_MS):
            result.setdefault(span, Increment()).add(position, 1)
    return result


def plan(first_minute: int, last_minute: int) -> list[Part]:
    """The items, and the inner buckets within them, whose counts add up to minutes
    first..last (inclusive), in time order."""
    if last_minute < first_minute:
        raise ValueError("the range ends before it starts")
    return _pieces(first_minute, last_minute + 1, "block")


def _pieces(start: int, stop: int, level: Level) -> list[Part]:
    """Minutes [start, stop) cut at the boundaries of `level`'s buckets, each piece covered."""
    size = RESOLUTION_MINUTES[level]
    spans = [Bucket(level, index) for index in range(start // size, (stop - 1) // size + 1)] if start < stop else []
    return [part for span in spans for part in _cover(max(start, span.first_minute), min(stop, span.stop_minute), span)]


def _cover(start: int, stop: int, span: Bucket) -> list[Part]:
    """Minutes [start, stop) inside `span`: the whole item, or its inner buckets wholly inside
    the range plus the finer pieces at either end."""
    if (start, stop) == (span.first_minute, span.stop_minute):
        return [Part(span)]
    inner = INNER[span.resolution][1]
    low, high = -(-start // inner), stop // inner  # the inner buckets wholly inside
    finer = LEVELS[LEVELS.index(span.resolution) - 1] if span.resolution != "hour" else None
    if low >= high:
        assert finer is not None  # an hour's inner buckets are single minutes
        return _pieces(start, stop, finer)
    middle = Part(span, (low - span.first_minute // inner, high - 1 - span.first_minute // inner))
    if finer is None:
        return [middle]
    return _pieces(start, low * inner, finer) + [middle] + _pieces(high * inner, stop, finer)
