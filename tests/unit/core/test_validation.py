"""Names, times and windows as the HTTP contract defines them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import times, validation
from chalicelib.core import window_params as windows
from chalicelib.core.errors import ValidationError


@given(st.integers(min_value=times.MIN_TIME_MS, max_value=times.MAX_TIME_MS - 1))
def test_given_epoch_ms_when_formatted_and_parsed_then_same_instant(t: int) -> None:
    assert times.parse(times.iso(t)) == t
    assert times.parse(t) == t


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-11-21T10:15:00Z", 1_795_256_100_000),
        ("2026-11-21T11:15:00+01:00", 1_795_256_100_000),
        ("2026-11-21T10:15:00.250Z", 1_795_256_100_250),
        ("1795256100000", 1_795_256_100_000),
    ],
)
def test_given_time_formats_when_parsed_then_epoch_ms(text: str, expected: int) -> None:
    assert times.parse(text) == expected


@pytest.mark.parametrize("bad", ["2026-11-21T10:15:00", "yesterday", 1.5, True, None, 1_795_256_100, [1]])
def test_given_bad_times_when_parsed_then_validation_error(bad: object) -> None:
    with pytest.raises(ValidationError):
        times.parse(bad)


@pytest.mark.parametrize("good", ["a", "jobs.provider-2", "x:y_z", "A" * 200])
def test_given_good_names_when_checked_then_accepted(good: str) -> None:
    assert validation.name(good) == good


@pytest.mark.parametrize("bad", ["", "A" * 201, "with space", "slash/", "é", 3, None])
def test_given_bad_names_when_checked_then_rejected(bad: object) -> None:
    with pytest.raises(ValidationError):
        validation.name(bad)


def test_given_window_params_when_ranged_then_minutes_match_contract() -> None:
    now = 1_795_256_130_000  # 10:15:30
    first, last = windows.minute_range({"window": "90m"}, now)
    assert last == now // 60_000 and last - first + 1 == 90
    first, last = windows.minute_range({}, now)
    assert last - first + 1 == 1440
    first, last = windows.minute_range({"start": "2026-11-21T10:00:59Z", "end": "2026-11-21T10:15:00Z"}, now)
    assert (first, last) == (1_795_255_200_000 // 60_000, 1_795_256_100_000 // 60_000)
    with pytest.raises(ValidationError):
        windows.minute_range({"window": "0m"}, now)
    with pytest.raises(ValidationError):
        windows.minute_range({"window": "24h", "start": "2026-11-21T10:00:00Z"}, now)


def test_given_a_body_with_fields_not_allowed_when_checked_then_the_message_lists_them_sorted_and_bounded() -> None:
    validation.known_fields({"url": 1}, {"url", "time"})  # only allowed fields: accepted
    with pytest.raises(ValidationError, match=r"^views\[2\] has unknown fields: a, b$"):
        validation.known_fields({"url": 1, "b": 2, "a": 3}, {"url"}, "views[2]")
    with pytest.raises(ValidationError) as refused:
        validation.known_fields({f"f{i:04d}": i for i in range(1000)}, set())
    assert str(refused.value).startswith("unknown fields: f0000, f0001") and len(str(refused.value)) == 216
