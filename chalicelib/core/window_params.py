"""Turning a request's query parameters into a minute range. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from chalicelib.core import timebuckets, validation
from chalicelib.core.errors import ValidationError

DEFAULT_WINDOW = "24h"
# The longest window any read covers (counts and histograms alike), checked before any work.
MAX_WINDOW_DAYS = 400
MAX_WINDOW_MINUTES = MAX_WINDOW_DAYS * 1440


def minute_range(params: Mapping[str, str], now_ms: int) -> tuple[int, int]:
    """[first, last] minutes from window (+ end), or from start and end, at most
    MAX_WINDOW_DAYS long."""
    first, last = _minute_range(params, now_ms)
    if last - first + 1 > MAX_WINDOW_MINUTES:
        raise ValidationError(f"a window may span at most {MAX_WINDOW_DAYS} days")
    return first, last


def _minute_range(params: Mapping[str, str], now_ms: int) -> tuple[int, int]:
    if "start" in params:
        if "window" in params:
            raise ValidationError("give either window (with an optional end) or start and end, not both")
        start = validation.time_ms(params["start"], "start")
        end = validation.time_ms(params["end"], "end") if "end" in params else now_ms
        first, last = timebuckets.minute_of(start), timebuckets.minute_of(end)
        if last < first:
            raise ValidationError("end is before start")
        return first, last
    end = validation.time_ms(params["end"], "end") if "end" in params else now_ms
    minutes = validation.duration_minutes(params.get("window", DEFAULT_WINDOW))
    return timebuckets.window_minutes(end, minutes)


def resolution(params: Mapping[str, str]) -> timebuckets.Resolution:
    value = params.get("resolution", "hour")
    if value not in timebuckets.RESOLUTION_MINUTES:
        raise ValidationError("resolution must be minute, hour or day")
    return value  # type: ignore[return-value]


def hour_range(params: Mapping[str, str], now_ms: int) -> tuple[int, int]:
    """[first, last] hours of an hour-aligned window, parsed as minute_range: start and end
    give the hours holding them; a window of W ending at T gives the ceil(W / 60) hours up to
    and including T's hour."""
    first, last = minute_range(params, now_ms)
    if "start" in params:
        return timebuckets.hours_between(first, last)
    return timebuckets.hours_ending(last, last - first + 1)
