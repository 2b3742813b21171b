"""A request's window parameters, parsed once for every windowed route, and the bounds every
windowed read shares (the longest window, the most histogram buckets). Pure.

app.py parses `window`, `start`, `end` and `resolution` here for every route; the capabilities
receive minute or hour ranges and check them against the same bounds before any read."""

from __future__ import annotations

from collections.abc import Mapping

from chalicelib.core import timebuckets, times, validation
from chalicelib.core.errors import ValidationError

DEFAULT_WINDOW = "24h"
# The parameters that make a read windowed (without any of them, a read may mean all time).
WINDOW_PARAMS = ("window", "start", "end")
# The longest window any read covers (counts and histograms alike), checked before any work.
MAX_WINDOW_DAYS = 400
MAX_WINDOW_HOURS = MAX_WINDOW_DAYS * 24
MAX_WINDOW_MINUTES = MAX_WINDOW_HOURS * 60
# The most buckets one histogram answers.
MAX_HISTOGRAM_BUCKETS = 5000
TOO_LONG = f"a window may span at most {MAX_WINDOW_DAYS} days"


def is_windowed(params: Mapping[str, str]) -> bool:
    return any(name in params for name in WINDOW_PARAMS)


def check_minutes(first: int, last: int) -> None:
    """ValidationError for a minute range longer than MAX_WINDOW_DAYS."""
    if last - first + 1 > MAX_WINDOW_MINUTES:
        raise ValidationError(TOO_LONG)


def check_hours(first: int, last: int) -> None:
    """ValidationError for an hour range longer than MAX_WINDOW_DAYS."""
    if last - first + 1 > MAX_WINDOW_HOURS:
        raise ValidationError(TOO_LONG)


def check_histogram(buckets: int) -> None:
    if buckets > MAX_HISTOGRAM_BUCKETS:
        raise ValidationError(f"a histogram has at most {MAX_HISTOGRAM_BUCKETS} buckets; use a coarser resolution")


def minute_range(params: Mapping[str, str], now_ms: int) -> tuple[int, int]:
    """[first, last] minutes from window (+ end), or from start and end, at most
    MAX_WINDOW_DAYS long."""
    first, last = _minute_range(params, now_ms)
    check_minutes(first, last)
    return first, last


def optional_minute_range(params: Mapping[str, str], now_ms: int) -> tuple[int, int] | None:
    """minute_range when a window parameter is given, else None (a read of all time)."""
    return minute_range(params, now_ms) if is_windowed(params) else None


def _minute_range(params: Mapping[str, str], now_ms: int) -> tuple[int, int]:
    if "start" in params:
        if "window" in params:
            raise ValidationError("give either window (with an optional end) or start and end, not both")
        start = times.parse(params["start"], "start")
        end = times.parse(params["end"], "end") if "end" in params else now_ms
        first, last = timebuckets.minute_of(start), timebuckets.minute_of(end)
        if last < first:
            raise ValidationError("end is before start")
        return first, last
    end = times.parse(params["end"], "end") if "end" in params else now_ms
    minutes = validation.duration_minutes(params.get("window", DEFAULT_WINDOW))
    return timebuckets.window_minutes(end, minutes)


def resolution(
    params: Mapping[str, str],
    allowed: tuple[timebuckets.Resolution, ...] = ("minute", "hour", "day"),
    default: timebuckets.Resolution = "hour",
) -> timebuckets.Resolution:
    """A histogram's `resolution`, one of `allowed` (default `default`)."""
    value = params.get("resolution", default)
    for choice in allowed:
        if value == choice:
            return choice
    raise ValidationError(f"resolution must be {', '.join(allowed[:-1])} or {allowed[-1]}")


def hour_range(params: Mapping[str, str], now_ms: int) -> tuple[int, int]:
    """[first, last] hours of an hour-aligned window, parsed as minute_range: start and end
    give the hours holding them; a window of W ending at T gives the ceil(W / 60) hours up to
    and including T's hour."""
    first, last = minute_range(params, now_ms)
    if "start" in params:
        return timebuckets.hours_between(first, last)
    return timebuckets.hours_ending(last, last - first + 1)


def optional_hour_range(params: Mapping[str, str], now_ms: int) -> tuple[int, int] | None:
    """hour_range when a window parameter is given, else None (a read of all time)."""
    return hour_range(params, now_ms) if is_windowed(params) else None
