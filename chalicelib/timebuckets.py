"""Minute/hour/day buckets and the decomposition of a window into bucket keys.

Pure: no I/O. A window is a half-open range of minute indexes [first, last + 1).
Buckets nest exactly (60 minutes per hour, 24 hours per UTC day), so any range can be
written as a signed sum of buckets; subtracting a few minutes from a whole hour is often
cheaper than adding most of its minutes, which is what keeps a 24-hour window at <= 83 keys
even when events carry timestamps later than the window's end.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

MINUTE_MS = 60_000
Resolution = Literal["minute", "hour", "day"]

# Size of each resolution in minutes, finest first.
RESOLUTION_MINUTES: dict[str, int] = {"minute": 1, "hour": 60, "day": 1440}
RESOLUTIONS: tuple[Resolution, ...] = ("minute", "hour", "day")


@dataclass(frozen=True, order=True)
class Bucket:
    resolution: Resolution
    index: int  # bucket number since the epoch at this resolution

    @property
    def first_minute(self) -> int:
        return self.index * RESOLUTION_MINUTES[self.resolution]

    @property
    def end_ms(self) -> int:
        """Exclusive end of the bucket, epoch milliseconds."""
        return (self.index + 1) * RESOLUTION_MINUTES[self.resolution] * MINUTE_MS

    @property
    def start_ms(self) -> int:
        return self.first_minute * MINUTE_MS


@dataclass(frozen=True)
class Term:
    """One bucket read, added (+1) or subtracted (-1)."""

    sign: int
    bucket: Bucket


def minute_of(t_ms: int) -> int:
    return t_ms // MINUTE_MS


def buckets_for(t_ms: int) -> tuple[Bucket, Bucket, Bucket]:
    """The minute, hour and day buckets an event at t_ms is counted in."""
    minute = minute_of(t_ms)
    return (
        Bucket("minute", minute),
        Bucket("hour", minute // 60),
        Bucket("day", minute // 1440),
    )


def window_minutes(end_ms: int, minutes: int) -> tuple[int, int]:
    """[first, last] minute indexes of a window of `minutes` ending at end_ms (inclusive)."""
    if minutes < 1:
        raise ValueError("a window is at least one minute long")
    last = minute_of(end_ms)
    return last - minutes + 1, last


def decompose(first_minute: int, last_minute: int) -> list[Term]:
    """Fewest bucket terms whose signed sum counts minutes first..last inclusive."""
    if last_minute < first_minute:
        raise ValueError("the window ends before it starts")
    terms = _signed_range(first_minute, last_minute + 1, len(RESOLUTIONS) - 1)
    return [Term(sign, Bucket(RESOLUTIONS[level], index)) for sign, level, index in terms]


@lru_cache(maxsize=4096)
def _signed_range(a: int, b: int, level: int) -> tuple[tuple[int, int, int], ...]:
    """Terms (sign, level, index) for the signed minute range [a, b).

    [a, b) = [a, A*s) + [A*s, B*s) + [B*s, b) holds for any A and B, with ranges whose
    end precedes their start counting negatively. At each level try rounding each end
    down or up (or skipping the level) and keep the cheapest.
    """
    if a == b:
        return ()
    if level == 0:
        sign = 1 if a < b else -1
        lo, hi = min(a, b), max(a, b)
        return tuple((sign, 0, m) for m in range(lo, hi))
    size = RESOLUTION_MINUTES[RESOLUTIONS[level]]
    best = _signed_range(a, b, level - 1)
    for big_a in {a // size, -(-a // size)}:
        for big_b in {b // size, -(-b // size)}:
            if big_a == big_b:
                continue
            sign = 1 if big_a < big_b else -1
            lo, hi = min(big_a, big_b), max(big_a, big_b)
            middle = tuple((sign, level, i) for i in range(lo, hi))
            candidate = (
                _signed_range(a, big_a * size, level - 1)
                + middle
                + _signed_range(big_b * size, b, level - 1)
            )
            if len(candidate) < len(best):
                best = candidate
    return best


def buckets_between(first_minute: int, last_minute: int, resolution: Resolution) -> list[Bucket]:
    """Every bucket at `resolution` that overlaps minutes first..last (for histograms)."""
    size = RESOLUTION_MINUTES[resolution]
    return [Bucket(resolution, i) for i in range(first_minute // size, last_minute // size + 1)]
