"""Times in every text form Tally uses, and numbered sort keys: each form parses back. Pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import keyspace, times

TIMES = st.integers(min_value=times.MIN_TIME_MS, max_value=times.MAX_TIME_MS - 1)


@given(TIMES)
def test_given_any_time_then_its_iso_and_compact_forms_parse_back_to_it(t_ms: int) -> None:
    assert times.parse(times.iso(t_ms)) == t_ms
    text = times.compact(t_ms)
    assert times.parse_compact(text[:15], text[15:18]) == t_ms


@given(TIMES)
def test_given_any_time_then_its_quarter_hour_is_the_quarter_holding_it(t_ms: int) -> None:
    start = t_ms - t_ms % times.QUARTER_HOUR_MS
    assert (
        times.quarter_hour(t_ms) == times.quarter_hour(start) == times.compact(start)[:8] + times.compact(start)[9:13]
    )
    assert times.quarter_hour(start - 1) != times.quarter_hour(start)
    assert times.parse_quarter_hour(times.quarter_hour(t_ms)) == start


def test_given_a_minute_that_starts_no_quarter_then_parse_quarter_hour_refuses_it() -> None:
    assert times.parse_quarter_hour("202611181415") == times.parse("2026-11-18T14:15:00Z")
    for text in ("202611181410", "202602301400", "2026111814"):
        with pytest.raises(ValueError):
            times.parse_quarter_hour(text)


@given(st.sampled_from(["h", "d", "b"]), st.integers(0, 10**10 - 1), st.integers(0, 10**10 - 1))
def test_given_numbered_sort_keys_then_index_read_back_and_text_order_is_number_order(
    prefix: str, a: int, b: int
) -> None:
    key_a, key_b = keyspace.index_sort_key(prefix, a), keyspace.index_sort_key(prefix, b)
    assert keyspace.sort_key_index(key_a) == a
    assert (key_a < key_b) == (a < b)
