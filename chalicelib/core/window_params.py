"""A request's window parameters and the bounds every windowed read shares. Pure. docs/design.md, "One way for
each mechanism" ("Window parameters"); local time and comparisons: docs/api.md, "Time zones, calendar windows and
comparisons"."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from chalicelib.core import timebuckets, times, validation, zones
from chalicelib.core.errors import ValidationError

DEFAULT_WINDOW = "24h"
# The parameters that make a read windowed (without any of them, a read may mean all time).
WINDOW_PARAMS = ("window", "start", "end")
# The longest window any read covers (counts and histograms alike), checked before any work.
MAX_WINDOW_DAYS = 400
MAX_WINDOW_MINUTES = MAX_WINDOW_DAYS * 1440
# The most buckets one histogram answers.
MAX_HISTOGRAM_BUCKETS = 5000


def is_windowed(params: Mapping[str, str]) -> bool:
    return any(name in params for name in WINDOW_PARAMS)


def check_minutes(first: int, last: int) -> None:
    if last - first + 1 > MAX_WINDOW_MINUTES:
        raise ValidationError(f"a window may span at most {MAX_WINDOW_DAYS} days")


def check_hours(first: int, last: int) -> None:
    check_minutes(first * 60, last * 60 + 59)


def check_histogram(buckets: int) -> None:
    if buckets > MAX_HISTOGRAM_BUCKETS:
        raise ValidationError(f"a histogram has at most {MAX_HISTOGRAM_BUCKETS} buckets; use a coarser resolution")


def minute_range(params: Mapping[str, str], now_ms: int, default_zone: str | None = None) -> tuple[int, int]:
    """[first, last] minutes from window (+ end), or from start and end, at most
    MAX_WINDOW_DAYS long; a calendar window in `tz` (else `default_zone`, else UTC)."""
    if "start" in params and "window" in params:
        raise ValidationError("give either window (with an optional end) or start and end, not both")
    start = times.parse(params["start"], "start") if "start" in params else None
    end = times.parse(params["end"], "end") if "end" in params else now_ms
    if params.get("window") in zones.CALENDAR_WINDOWS:
        # `end` moves now: window=yesterday&end=T is the day before T's, in the zone.
        zone = zones.parse(params.get("tz", default_zone))
        first, last = zones.calendar_window(zone, params["window"], timebuckets.minute_of(end))
    elif start is not None:
        first, last = timebuckets.minute_of(start), timebuckets.minute_of(end)
        if last < first:
            raise ValidationError("end is before start")
    else:
        value = params.get("window", DEFAULT_WINDOW)
        if value and value[0].isalpha():
            raise ValidationError(
                f"window must be a duration (90m, 24h, 7d) or one of {', '.join(zones.CALENDAR_WINDOWS)}"
            )
        first, last = timebuckets.window_minutes(end, validation.duration_minutes(value))
    check_minutes(first, last)
    return first, last


@dataclass(frozen=True)
class Window:
    """A request's window in minutes, its zone, and the minutes it is compared with."""

    first: int
    last: int
    zone: ZoneInfo
    local: bool  # `tz` given (or a default zone): answers give times on its clock
    previous: tuple[int, int] | None = None

    def label(self, minute: int) -> str:
        """A minute as the answer writes it: local ISO time with offset, else ISO UTC."""
        return zones.label(self.zone, minute) if self.local else times.utc_label(minute)


def window(params: Mapping[str, str], now_ms: int, default_zone: str | None = None) -> Window:
    """minute_range with its zone and, with `compare=previous_period|year_over_year`, the period it
    is compared with (checked against the same bounds)."""
    first, last = minute_range(params, now_ms, default_zone)
    how, previous = params.get("compare"), None
    if how is not None and how not in zones.COMPARISONS:
        raise ValidationError(f"compare must be {' or '.join(zones.COMPARISONS)}")
    zone = zones.parse(params.get("tz", default_zone))
    if how is not None:
        calendar = params.get("window") if params.get("window") in zones.CALENDAR_WINDOWS else None
        previous = zones.comparison(zone, (first, last), how, calendar)
        check_minutes(*previous)
    return Window(first, last, zone, "tz" in params or default_zone is not None, previous)


# Fields naming what was read rather than what was counted: said once, not again in `previous`.
IDENTITY_FIELDS = ("counter", "by", "where", "resolution", "tz", "url", "name", "names", "site")


def compared(window: Window, read: Callable[[int, int], dict[str, Any]], zoned: bool = False) -> dict[str, Any]:
    """read(first, last) of the window, with `previous`: the same read of the period compared with;
    when `zoned` and the window is local, with its `tz` last."""
    answer = read(window.first, window.last)
    if window.previous is not None:
        answer["previous"] = {k: v for k, v in read(*window.previous).items() if k not in IDENTITY_FIELDS}
    return {**answer, "tz": window.zone.key} if zoned and window.local else answer


LOCAL_RESOLUTIONS: tuple[zones.LocalResolution, ...] = ("minute", "hour", "day", "week", "month")


def local_resolution(
    params: Mapping[str, str], choices: tuple[zones.LocalResolution, ...] = LOCAL_RESOLUTIONS, default: str = "hour"
) -> zones.LocalResolution:
    """A histogram's `resolution` with local buckets: one of `choices`, `default` when absent."""
    value = params.get("resolution", default)
    for choice in choices:
        if value == choice:
            return choice
    raise ValidationError(f"resolution must be {', '.join(choices[:-1])} or {choices[-1]}")


def hour_range(params: Mapping[str, str], now_ms: int) -> tuple[int, int]:
    """[first, last] hours of an hour-aligned window, parsed as minute_range (docs/api.md,
    "Conventions"): start and end give the hours holding them."""
    return aligned_hours(params, *minute_range(params, now_ms))


def aligned_hours(params: Mapping[str, str], first: int, last: int) -> tuple[int, int]:
    """The hours an hour-aligned read covers for window minutes first..last (a window, or the
    period it is compared with), by hour_range's rule."""
    if "start" in params or params.get("window") in zones.CALENDAR_WINDOWS:
        return first // timebuckets.HOUR_MINUTES, last // timebuckets.HOUR_MINUTES
    return timebuckets.hours_ending(last, last - first + 1)
