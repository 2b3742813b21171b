"""Local buckets, calendar windows and comparisons, checked against brute force: the local clock
read minute by minute through zoneinfo."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, available_timezones

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.core import zones
from chalicelib.core.errors import ValidationError
from tests.local_time import calendar_dates

ZONES = sorted(available_timezones())
# Zones whose days or hours are unusual: daylight saving (two hemispheres, half an hour at Lord
# Howe, midnight changes in Santiago and Havana), 30- and 45-minute offsets, a skipped day (Apia).
ODD_ZONES = [
    "America/New_York",
    "Europe/Berlin",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Pacific/Chatham",
    "Pacific/Apia",
    "Asia/Tehran",
    "America/St_Johns",
]


def minute_of(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()) // 60


def local(zone: ZoneInfo, minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, zone)


def brute_starts(zone: ZoneInfo, first: int, last: int, key: Callable[[datetime], Hashable]) -> list[int]:
    """Every minute in (first, last] where the local bucket changes, by reading the clock at each:
    days and longer by the running latest local period (a clock set back across midnight does
    not reopen yesterday), hours by local date, hour and offset."""
    starts = []
    previous = key(local(zone, first))
    for m in range(first + 1, last + 1):
        current = key(local(zone, m))
        if current != previous and not (
            isinstance(current, date) and isinstance(previous, date) and current < previous
        ):
            starts.append(m)
            previous = current
    return starts


def day_key(t: datetime) -> Hashable:
    return t.date()


def hour_key(t: datetime) -> Hashable:
    return (t.date(), t.hour, t.utcoffset())


def week_key(t: datetime) -> Hashable:
    return t.date() - timedelta(days=t.weekday())


def month_key(t: datetime) -> Hashable:
    return t.date().replace(day=1)


KEYS = {"hour": hour_key, "day": day_key, "week": week_key, "month": month_key}


def changes_in_year(zone: ZoneInfo, year: int) -> list[int]:
    """The minutes near which the zone's offset changed in a year (to the day)."""
    days = [minute_of(year, 1, 1) + d * 1440 for d in range(367)]
    offsets = [local(zone, m).utcoffset() for m in days]
    return [days[i] for i in range(1, len(days)) if offsets[i] != offsets[i - 1]]


@st.composite
def zone_and_minute(draw: st.DrawFn, zone_names: list[str] = ZONES) -> tuple[ZoneInfo, int]:
    """A zone and a minute from 2000 to 2099, half the time the day of one of its offset changes."""
    zone = ZoneInfo(draw(st.sampled_from(zone_names)))
    year = draw(st.integers(2000, 2099))
    changes = changes_in_year(zone, year) if draw(st.booleans()) else []
    if changes:
        return zone, draw(st.sampled_from(changes)) + draw(st.integers(-1440, 1440))
    return zone, draw(st.integers(minute_of(year, 1, 1), minute_of(year, 12, 31)))


# -- parse --------------------------------------------------------------------------------


def test_given_no_zone_when_parsed_then_utc() -> None:
    assert zones.parse(None).key == "UTC"


def test_given_iana_names_when_parsed_then_their_zones() -> None:
    for name in ("Europe/Berlin", "Asia/Kathmandu", "UTC", "Pacific/Chatham"):
        assert zones.parse(name).key == name


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("Mars/Olympus", "not a known IANA time-zone name: 'Mars/Olympus'"),
        ("europe/berlin", "did you mean Europe/Berlin?"),
        ("America", "not a known IANA time-zone name"),  # a folder of the database, not a zone
        ("../../etc/passwd", "not a known IANA time-zone name"),
        ("/usr/share/zoneinfo/UTC", "not a known IANA time-zone name"),
        ("", "1-64 characters"),
        ("A" * 65, "1-64 characters"),
        ("+05:30", "not a known IANA time-zone name"),
    ],
)
def test_given_unknown_or_malformed_zone_when_parsed_then_validation_error_says_why(value: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says.replace("?", r"\?").replace("(", r"\(")):
        zones.parse(value)


# -- buckets ------------------------------------------------------------------------------------


def day_lengths(zone_name: str, day: date) -> list[int]:
    zone = zones.parse(zone_name)
    start = zones.day_start(zone, day)
    return [b.last_minute - b.first_minute + 1 for b in zones.buckets(zone, start, start, "day")]


def test_given_new_york_changes_of_2026_when_days_bucketed_then_25_and_23_hours() -> None:
    assert day_lengths("America/New_York", date(2026, 11, 1)) == [25 * 60]
    assert day_lengths("America/New_York", date(2026, 3, 8)) == [23 * 60]
    assert day_lengths("America/New_York", date(2026, 3, 9)) == [24 * 60]


def test_given_offset_zones_when_day_starts_then_at_local_midnight_in_utc() -> None:
    berlin, kolkata, kathmandu, chatham = (
        zones.parse(z) for z in ("Europe/Berlin", "Asia/Kolkata", "Asia/Kathmandu", "Pacific/Chatham")
    )
    assert zones.day_start(berlin, date(2026, 11, 26)) == minute_of(2026, 11, 25, 23)
    assert zones.day_start(kolkata, date(2026, 11, 26)) == minute_of(2026, 11, 25, 18, 30)
    assert zones.day_start(kathmandu, date(2026, 11, 26)) == minute_of(2026, 11, 25, 18, 15)
    assert zones.day_start(chatham, date(2026, 11, 26)) == minute_of(2026, 11, 25, 10, 15)  # +13:45
    assert zones.day_start(chatham, date(2026, 6, 1)) == minute_of(2026, 5, 31, 11, 15)  # +12:45


def test_given_new_york_fall_back_when_hours_bucketed_then_one_oclock_twice_labelled_by_offset() -> None:
    zone = zones.parse("America/New_York")
    start = zones.day_start(zone, date(2026, 11, 1))
    hours = zones.buckets(zone, start, start + 25 * 60 - 1, "hour")
    assert len(hours) == 25
    assert [h.start for h in hours[:4]] == [
        "2026-11-01T00:00:00-04:00",
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T02:00:00-05:00",
    ]
    assert all(h.last_minute - h.first_minute == 59 for h in hours)


def test_given_kathmandu_when_hours_bucketed_then_they_start_at_quarter_past_utc() -> None:
    zone = zones.parse("Asia/Kathmandu")
    hours = zones.buckets(zone, minute_of(2026, 11, 26, 10, 0), minute_of(2026, 11, 26, 11, 59), "hour")
    assert [h.first_minute % 60 for h in hours] == [15, 15, 15]
    assert hours[0].start == "2026-11-26T15:00:00+05:45"


def test_given_chatham_spring_change_when_hours_bucketed_then_the_short_hours_around_it() -> None:
    zone = zones.parse("Pacific/Chatham")
    start = zones.day_start(zone, date(2026, 9, 27))
    hours = zones.buckets(zone, start, start + 5 * 60, "hour")
    assert [(h.start, h.last_minute - h.first_minute + 1) for h in hours[1:5]] == [
        ("2026-09-27T01:00:00+12:45", 60),
        ("2026-09-27T02:00:00+12:45", 45),
        ("2026-09-27T03:45:00+13:45", 15),
        ("2026-09-27T04:00:00+13:45", 60),
    ]


def test_given_apia_skipped_day_when_days_bucketed_then_no_empty_bucket() -> None:
    zone = zones.parse("Pacific/Apia")
    start = zones.day_start(zone, date(2011, 12, 29))
    days = zones.buckets(zone, start, start + 2 * 1440, "day")
    assert [d.start[:10] for d in days[:2]] == ["2011-12-29", "2011-12-31"]


@settings(max_examples=150, deadline=None)
@given(zone_and_minute(), st.sampled_from(["hour", "day"]))
def test_given_any_zone_when_hours_or_days_bucketed_then_brute_force_boundaries(
    where: tuple[ZoneInfo, int], resolution: zones.LocalResolution
) -> None:
    zone, minute = where
    first, last = minute - 1440, minute + 1440
    built = zones.buckets(zone, first, last, resolution)
    assert built[0].first_minute <= first and built[-1].last_minute >= last
    assert all(a.last_minute + 1 == b.first_minute for a, b in zip(built, built[1:]))
    assert [b.first_minute for b in built[1:]] == brute_starts(zone, first, last, KEYS[resolution])
    for bucket in built:
        assert bucket.start == local(zone, bucket.first_minute).isoformat(timespec="seconds")


@settings(max_examples=25, deadline=None)
@given(zone_and_minute(ODD_ZONES), st.sampled_from(["week", "month"]))
def test_given_any_zone_when_weeks_or_months_bucketed_then_brute_force_boundaries(
    where: tuple[ZoneInfo, int], resolution: zones.LocalResolution
) -> None:
    zone, minute = where
    first, last = minute - 32 * 1440, minute + 32 * 1440
    built = zones.buckets(zone, first, last, resolution)
    assert [b.first_minute for b in built[1:]] == brute_starts(zone, first, last, KEYS[resolution])
    assert built[0].first_minute <= first and built[-1].last_minute >= last
    assert all(local(zone, b.first_minute).day == 1 for b in built if resolution == "month")


# -- calendar windows ----------------------------------------------------------------------------


def starts_date(zone: ZoneInfo, minute: int, day: date) -> bool:
    """Whether `minute` is the first whose local date is `day` or later."""
    return local(zone, minute).date() >= day > local(zone, minute - 1).date()


@settings(max_examples=200, deadline=None)
@given(zone_and_minute(), st.sampled_from(zones.CALENDAR_WINDOWS))
def test_given_any_zone_when_calendar_window_then_it_starts_and_ends_at_local_midnights(
    where: tuple[ZoneInfo, int], window: str
) -> None:
    zone, now = where
    first, last = zones.calendar_window(zone, window, now)
    start, stop = calendar_dates(window, local(zone, now).date())
    assert starts_date(zone, first, start)
    if stop is None:
        assert last == now
    else:
        assert starts_date(zone, last + 1, stop)


def test_given_berlin_late_evening_when_today_then_from_local_midnight_to_now() -> None:
    zone = zones.parse("Europe/Berlin")
    now = minute_of(2026, 11, 26, 22, 30)  # 23:30 in Berlin
    assert zones.calendar_window(zone, "today", now) == (minute_of(2026, 11, 25, 23), now)
    assert zones.calendar_window(zone, "this_week", now)[0] == minute_of(2026, 11, 22, 23)  # Monday 23rd


# -- comparisons ----------------------------------------------------------------------------


def test_given_plain_window_when_previous_period_then_same_length_just_before() -> None:
    zone = zones.parse("Asia/Kathmandu")
    assert zones.comparison(zone, (1000, 1999), "previous_period") == (0, 999)


def test_given_this_month_so_far_when_previous_period_then_last_month_to_the_same_point() -> None:
    zone = zones.parse("America/New_York")
    now = minute_of(2026, 3, 15, 18, 30)  # 14:30 EDT on the 15th
    window = zones.calendar_window(zone, "this_month", now)
    first, last = zones.comparison(zone, window, "previous_period", "this_month")
    assert local(zone, first).isoformat() == "2026-02-01T00:00:00-05:00"
    assert local(zone, last + 1).isoformat() == "2026-02-15T14:31:00-05:00"


def test_given_march_31_when_this_month_compared_then_february_to_its_last_day() -> None:
    zone = zones.parse("Europe/Berlin")
    now = minute_of(2026, 3, 31, 8)
    first, last = zones.comparison(
        zone, zones.calendar_window(zone, "this_month", now), "previous_period", "this_month"
    )
    assert (local(zone, first).date(), local(zone, last).date()) == (date(2026, 2, 1), date(2026, 2, 28))


def test_given_yesterday_after_a_23_hour_day_when_previous_period_then_the_whole_day_before() -> None:
    zone = zones.parse("America/New_York")
    now = minute_of(2026, 3, 9, 15)  # yesterday was 8 March, 23 hours
    window = zones.calendar_window(zone, "yesterday", now)
    assert window[1] - window[0] + 1 == 23 * 60
    first, last = zones.comparison(zone, window, "previous_period", "yesterday")
    assert (first, last - first + 1) == (zones.day_start(zone, date(2026, 3, 7)), 24 * 60)


def test_given_leap_day_when_year_over_year_then_28_february() -> None:
    zone = zones.parse("Asia/Kolkata")
    start = zones.day_start(zone, date(2028, 2, 29))
    first, last = zones.comparison(zone, (start, start + 1439), "year_over_year")
    assert (local(zone, first).date(), last - first + 1) == (date(2027, 2, 28), 1440)


def test_given_last_week_when_year_over_year_then_52_weeks_earlier_from_monday() -> None:
    zone = zones.parse("Pacific/Chatham")
    window = zones.calendar_window(zone, "last_week", minute_of(2026, 11, 26))
    first, last = zones.comparison(zone, window, "year_over_year", "last_week")
    assert local(zone, first).weekday() == 0 and local(zone, last + 1).weekday() == 0
    assert local(zone, window[0]).date() - local(zone, first).date() == timedelta(weeks=52)


@settings(max_examples=100, deadline=None)
@given(zone_and_minute(), st.sampled_from(zones.CALENDAR_WINDOWS), st.sampled_from(zones.COMPARISONS))
def test_given_any_calendar_window_when_compared_then_an_earlier_period_on_local_clock_boundaries(
    where: tuple[ZoneInfo, int], window: str, how: str
) -> None:
    zone, now = where
    first, last = zones.calendar_window(zone, window, now)
    before_first, before_last = zones.comparison(zone, (first, last), how, window)
    assert before_first <= before_last < first
    start = local(zone, before_first).date()
    if window in ("this_month", "last_month", "this_year") or (how == "year_over_year" and "week" not in window):
        assert start.day == 1 or window in ("today", "yesterday")
    assert starts_date(zone, before_first, start)


def test_given_a_day_whose_midnight_was_skipped_when_compared_then_the_day_before_from_its_own_midnight() -> None:
    # America/Fortaleza, 8 October 2000: clocks went from 00:00 to 01:00, so that day starts at
    # 01:00 and the day before still at 00:00.
    zone = zones.parse("America/Fortaleza")
    now = int(datetime(2000, 10, 8, 1, 22, tzinfo=zone).timestamp()) // 60
    today = zones.calendar_window(zone, "today", now)
    yesterday = zones.calendar_window(zone, "yesterday", now)

    before_today = zones.comparison(zone, today, "previous_period", "today")
    before_yesterday = zones.comparison(zone, yesterday, "previous_period", "yesterday")

    assert local(zone, today[0]).time() == time(1, 0)
    assert before_today[0] == yesterday[0] and local(zone, before_today[0]).time() == time(0, 0)
    assert local(zone, before_today[1]) == datetime(2000, 10, 7, 1, 22, tzinfo=zone)  # to the same clock time
    assert before_yesterday == zones.calendar_window(zone, "yesterday", yesterday[0])
    assert before_yesterday[1] == yesterday[0] - 1
