"""Counts-table keys: buckets sort in time order, stream positions sort like sequence numbers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import keys as counter_keys


@given(st.integers(0, 10**40 - 1), st.integers(0, 10**40 - 1))
def test_given_sequence_numbers_when_made_positions_then_text_order_is_number_order(a: int, b: int) -> None:
    pa, pb = counter_keys.sequence_position(str(a)), counter_keys.sequence_position(str(b))
    assert pa is not None and pb is not None
    assert (pa < pb) == (a < b) and (pa == pb) == (a == b)


def test_given_foreign_sequence_numbers_when_made_positions_then_none() -> None:
    for text in ["", "12a", "-1", "1" * 41, " 12", "1.5"]:
        assert counter_keys.sequence_position(text) is None


def test_given_text_no_key_can_hold_when_keys_built_then_value_error() -> None:
    with pytest.raises(ValueError):
        counter_keys.marker_key("c", "id-\udc00x")
    with pytest.raises(ValueError):
        counter_keys.audit_key("p" * 2045)
    assert counter_keys.audit_key("202611211000#0")["pk"]["S"] == "AUD#202611211000#0"


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_given_buckets_when_keyed_then_sort_keys_order_like_indexes(a: int, b: int) -> None:
    ka = counter_keys.bucket_key("c", Bucket("hour", a))["sk"]["S"]
    kb = counter_keys.bucket_key("c", Bucket("hour", b))["sk"]["S"]
    assert (ka < kb) == (a < b)
