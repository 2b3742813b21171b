"""One parser for every windowed route: durations, calendar windows in `tz`, `compare`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chalicelib.core import window_params
from chalicelib.core.errors import ValidationError


def minute(text: str) -> int:
    return int(datetime.fromisoformat(text).astimezone(UTC).timestamp()) // 60


NOW_MS = minute("2026-11-26T22:30:00+00:00") * 60_000  # 23:30 in Berlin, 04:15 the 27th in Kathmandu


def test_given_calendar_window_and_zone_when_parsed_then_local_midnight_to_now() -> None:
    params = {"window": "today", "tz": "Europe/Berlin"}
    assert window_params.minute_range(params, NOW_MS) == (minute("2026-11-26T00:00:00+01:00"), NOW_MS // 60_000)
    kathmandu = {"window": "yesterday", "tz": "Asia/Kathmandu"}
    assert window_params.minute_range(kathmandu, NOW_MS) == (
        minute("2026-11-26T00:00:00+05:45"),
        minute("2026-11-27T00:00:00+05:45") - 1,
    )


def test_given_calendar_window_without_zone_when_parsed_then_utc_or_the_default_zone() -> None:
    assert window_params.minute_range({"window": "today"}, NOW_MS)[0] == minute("2026-11-26T00:00:00+00:00")
    assert window_params.minute_range({"window": "today"}, NOW_MS, "Asia/Kathmandu")[0] == minute(
        "2026-11-27T00:00:00+05:45"
    )


def test_given_calendar_window_and_end_when_parsed_then_end_is_its_now() -> None:
    params = {"window": "last_month", "tz": "Europe/Berlin", "end": "2026-03-05T12:00:00Z"}
    assert window_params.minute_range(params, NOW_MS) == (
        minute("2026-02-01T00:00:00+01:00"),
        minute("2026-03-01T00:00:00+01:00") - 1,
    )


def test_given_calendar_window_when_hour_range_then_the_hours_holding_it() -> None:
    first, last = window_params.hour_range({"window": "yesterday", "tz": "Asia/Kolkata"}, NOW_MS)
    assert (first * 60, last * 60 + 59) == (
        minute("2026-11-26T00:00:00+05:30") - 30,
        minute("2026-11-27T00:00:00+05:30") + 29,
    )


def test_given_compare_when_window_built_then_previous_and_labels_in_the_zone() -> None:
    window = window_params.window({"window": "this_week", "tz": "Europe/Berlin", "compare": "previous_period"}, NOW_MS)
    assert window.label(window.first) == "2026-11-23T00:00:00+01:00"
    assert window.previous is not None
    assert window.label(window.previous[0]) == "2026-11-16T00:00:00+01:00"
    assert window.label(window.previous[1] + 1) == "2026-11-19T23:31:00+01:00"  # Thursday at now's minute
    plain = window_params.window({"window": "2h"}, NOW_MS)
    assert (plain.local, plain.previous, plain.label(plain.first)) == (False, None, "2026-11-26T20:31:00.000Z")


def test_given_compared_read_when_answered_then_previous_leaves_out_what_names_the_read() -> None:
    window = window_params.window({"window": "1h", "compare": "year_over_year"}, NOW_MS)
    answer = window_params.compared(window, lambda first, last: {"counter": "c", "where": {}, "count": last - first})
    assert answer == {"counter": "c", "where": {}, "count": 59, "previous": {"count": 59}}


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"window": "today", "tz": "Moon/Base"}, "not a known IANA time-zone name"),
        ({"tz": "Europe/Berlin", "compare": "yesterday"}, "compare must be previous_period or year_over_year"),
        ({"window": "next_week"}, "window must be a duration (90m, 24h, 7d) or one of today, yesterday"),
        ({"window": "today", "start": "1790000000000"}, "either window"),
    ],
)
def test_given_bad_window_parameters_when_parsed_then_validation_error(
    params: dict[str, str], says: str | None
) -> None:
    if says is None:  # the longest window compares with another as long: allowed
        assert window_params.window(params, NOW_MS).previous is not None
        return
    with pytest.raises(ValidationError, match=says.replace("(", r"\(").replace(")", r"\)")):
        window_params.window(params, NOW_MS)


def test_given_the_longest_window_when_compared_then_the_period_before_is_as_long() -> None:
    window = window_params.window({"window": "400d", "compare": "previous_period"}, NOW_MS)
    assert window.previous == (2 * window.first - window.last - 1, window.first - 1)


def test_given_resolutions_when_parsed_then_local_ones_include_week_and_month() -> None:
    assert window_params.local_resolution({"resolution": "month"}) == "month"
    assert window_params.local_resolution({}) == "hour"
    with pytest.raises(ValidationError, match="minute, hour, day, week or month"):
        window_params.local_resolution({"resolution": "year"})
