"""Local time: a request's time zone, calendar windows in it, local buckets as UTC minute ranges, and the period a
window is compared with, in epoch minutes. Pure. docs/api.md, "Time zones, calendar windows and comparisons"."""

from __future__ import annotations

import bisect
import functools
from calendar import monthrange
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Literal, TypeVar
from zoneinfo import ZoneInfo, available_timezones, reset_tzpath

from chalicelib.core import validation
from chalicelib.core.errors import ValidationError

reset_tzpath(to=[])  # the pinned `tzdata` package only (docs/api.md, as above), never the machine's

DEFAULT_ZONE = "UTC"
ZONE_MAX_CHARS = 64  # the longest IANA name is about 32 characters
COMPARISONS = ("previous_period", "year_over_year")
LocalResolution = Literal["minute", "hour", "day", "week", "month"]
Window = tuple[int, int]  # [first, last] epoch minutes, inclusive
Day = TypeVar("Day", bound=date)  # a date, or a local time (datetime)

# The longest each calendar period can be: a day of 25 hours, a week or month holding one.
_LONGEST = {"day": 25 * 60, "week": 7 * 1440 + 60, "month": 31 * 1440 + 60, "year": 366 * 1440 + 60}
# Each calendar window: its period, and how many periods before the one holding now it is.
_CALENDAR = {
    "today": ("day", 0),
    "yesterday": ("day", -1),
    "this_week": ("week", 0),
    "last_week": ("week", -1),
    "this_month": ("month", 0),
    "last_month": ("month", -1),
    "this_year": ("year", 0),
}
CALENDAR_WINDOWS = tuple(_CALENDAR)
CALENDAR_LONGEST_MINUTES = {window: _LONGEST[period] for window, (period, _) in _CALENDAR.items()}


@functools.cache
def names() -> frozenset[str]:
    """Every zone name `tz` accepts."""
    return frozenset(available_timezones())


def parse(value: str | None) -> ZoneInfo:
    """The zone named by an IANA name (`Europe/Berlin`); None gives UTC. ValidationError for any
    other text, with the name of the same spelling in other case when there is one."""
    if value is None:
        return ZoneInfo(DEFAULT_ZONE)
    validation.text(
        value, "tz", ZONE_MAX_CHARS, says="an IANA time-zone name such as Europe/Berlin ({span} characters)"
    )
    if value not in names():
        near = [name for name in names() if name.lower() == value.lower()]
        hint = f"; did you mean {near[0]}?" if near else ""
        raise ValidationError(f"tz is not a known IANA time-zone name: {value!r}{hint}")
    return ZoneInfo(value)


def wall(zone: ZoneInfo, minute: int) -> datetime:
    """The local clock (naive) at an epoch minute."""
    return datetime.fromtimestamp(minute * 60, zone).replace(tzinfo=None)


def offset_minutes(zone: ZoneInfo, minute: int) -> int:
    moment = datetime.fromtimestamp(minute * 60, zone).utcoffset()
    return 0 if moment is None else moment // timedelta(minutes=1)


def label(zone: ZoneInfo, minute: int) -> str:
    """A bucket's start as local ISO time with its offset: 2026-11-01T00:00:00-04:00."""
    return datetime.fromtimestamp(minute * 60, zone).isoformat(timespec="seconds")


def at_or_after(zone: ZoneInfo, local: datetime) -> int:
    """The first epoch minute whose local clock reads `local` (naive, whole minutes) or later:
    the earlier of a repeated time, the end of the gap for a skipped one."""
    guesses = sorted({int(local.replace(tzinfo=zone, fold=fold).timestamp()) // 60 for fold in (0, 1)})
    exact = [m for m in guesses if wall(zone, m) == local]
    if exact:
        return exact[0]
    # Skipped: the clock jumps over `local` between the two guesses; find where.
    low, high = guesses[0], guesses[-1]
    while wall(zone, high) < local:  # a guess on the far side of a second change (never seen)
        high += 60
    return _first(low, high, lambda minute: wall(zone, minute) >= local)


def _first(low: int, high: int, holds: Callable[[int], bool]) -> int:
    """The first minute in (low, high] from which `holds` is true (it is at `high`, not at `low`)."""
    return low + 1 + bisect.bisect_left(range(low + 1, high + 1), True, key=holds)


def day_start(zone: ZoneInfo, day: date) -> int:
    """The first epoch minute of a local day (its midnight, or the end of a gap holding it)."""
    return at_or_after(zone, datetime.combine(day, time()))


@dataclass(frozen=True)
class LocalBucket:
    """A local bucket as the UTC minutes it covers, [first, last], and its label."""

    first_minute: int
    last_minute: int
    start: str


def _period_start(period: str, day: date) -> date:
    if period == "week":
        return day - timedelta(days=day.weekday())  # ISO weeks: Monday
    if period == "month":
        return day.replace(day=1)
    if period == "year":
        return day.replace(month=1, day=1)
    return day


def _step(period: str, moment: Day, count: int) -> Day:
    """The same point `count` periods later (negative: earlier), the day clamped to a month's last."""
    if period in ("month", "year"):
        index = moment.year * 12 + moment.month - 1 + count * (12 if period == "year" else 1)
        year, month = divmod(index, 12)
        return moment.replace(year=year, month=month + 1, day=min(moment.day, monthrange(year, month + 1)[1]))
    return moment + timedelta(days=count * (7 if period == "week" else 1))


def _unless_changed(zone: ZoneInfo, low: int, high: int, boundary: int) -> int:
    """`boundary` when minutes low and high have one offset; else the first minute in (low, high]
    whose offset is high's."""
    target = offset_minutes(zone, high)
    if offset_minutes(zone, low) == target:
        return boundary
    return _first(low, high, lambda minute: offset_minutes(zone, minute) == target)


def bucket_start(zone: ZoneInfo, minute: int, resolution: LocalResolution) -> int:
    """The first epoch minute of the local bucket holding `minute`."""
    if resolution == "minute":
        return minute
    if resolution == "hour":  # the last :00 on the local clock, or the last change of offset
        start = minute - (minute + offset_minutes(zone, minute)) % 60
        return _unless_changed(zone, start, minute, start)
    day = _period_start(resolution, wall(zone, minute).date())
    start = day_start(zone, day)
    # A clock set back across midnight reads yesterday's date after today began: the bucket is
    # still the one that began last.
    return start if start <= minute else day_start(zone, _period_start(resolution, day - timedelta(days=1)))


def next_bucket(zone: ZoneInfo, start: int, resolution: LocalResolution) -> int:
    """The first minute of the local bucket after the one starting at `start`."""
    if resolution == "minute":
        return start + 1
    if resolution == "hour":
        stop = start + 60 - (start + offset_minutes(zone, start)) % 60
        return _unless_changed(zone, start, stop, stop)
    following = _step(resolution, _period_start(resolution, wall(zone, start).date()), 1)
    while (stop := day_start(zone, following)) <= start:  # a local period skipped whole (Pacific/Apia, 2011-12-30)
        following = _step(resolution, following, 1)
    return stop


NOMINAL_MINUTES: dict[str, int] = {"minute": 1, "hour": 60, "day": 1440, "week": 7 * 1440, "month": 28 * 1440}


def nominal_count(first: int, last: int, resolution: LocalResolution) -> int:
    """The most buckets of the resolution's nominal length minutes [first, last] can overlap: what the
    histogram cap is checked on (docs/api.md, "Time zones, calendar windows and comparisons")."""
    return -(-(last - first) // NOMINAL_MINUTES[resolution]) + 1


def buckets(zone: ZoneInfo, first: int, last: int, resolution: LocalResolution) -> list[LocalBucket]:
    """Every local bucket overlapping minutes [first, last], whole, oldest first."""
    if last < first:
        raise ValueError("the window ends before it starts")
    out: list[LocalBucket] = []
    start = bucket_start(zone, first, resolution)
    while start <= last:
        stop = next_bucket(zone, start, resolution)
        out.append(LocalBucket(start, stop - 1, label(zone, start)))
        start = stop
    return out


def calendar_window(zone: ZoneInfo, window: str, now_minute: int) -> Window:
    """[first, last] minutes of a calendar window in the zone; the windows that hold now
    (today, this_week, this_month, this_year) end at now's minute."""
    period, back = _CALENDAR[window]
    current = _period_start(period, wall(zone, now_minute).date())
    first = day_start(zone, _step(period, current, back))
    return first, now_minute if back == 0 else day_start(zone, current) - 1


def comparison(zone: ZoneInfo, window: Window, how: str, calendar: str | None = None) -> Window:
    """The period a window is compared with by `how` (docs/api.md, as above): but for a duration's
    previous period, the window's start and (exclusive) end each moved on the local clock."""
    first, last = window
    if how == "previous_period":
        if calendar is None:
            return 2 * first - last - 1, first - 1
        period, count = _CALENDAR[calendar][0], -1
    elif how == "year_over_year":  # a week 52 weeks earlier, so its days are the same weekdays
        period, count = ("week", -52) if calendar in ("this_week", "last_week") else ("year", -1)
    else:
        raise ValueError(f"not a comparison: {how}")

    def moved(minute: int) -> int:
        local = wall(zone, minute)
        # In a calendar window, a bound on a day's start moves to the start of the moved day, which
        # is not the same clock time when either day's midnight was skipped.
        if calendar is not None and minute == day_start(zone, local.date()):
            return day_start(zone, _step(period, local, count).date())
        return at_or_after(zone, _step(period, local, count))

    start = moved(first)
    return start, max(start, moved(last + 1) - 1)
