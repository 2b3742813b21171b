"""Counts-table keys: buckets sort in time order, stream positions sort like sequence numbers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import audit_items, layout


@given(st.integers(0, 10**40 - 1), st.integers(0, 10**40 - 1))
def test_given_sequence_numbers_when_made_positions_then_text_order_is_number_order(a: int, b: int) -> None:
    pa, pb = layout.sequence_position(str(a)), layout.sequence_position(str(b))
    assert pa is not None and pb is not None
    assert (pa < pb) == (a < b) and (pa == pb) == (a == b)


def test_given_foreign_sequence_numbers_when_made_positions_then_none() -> None:
    for text in ["", "12a", "-1", "1" * 41, " 12", "1.5"]:
        assert layout.sequence_position(text) is None


def test_given_text_no_key_can_hold_when_keys_built_then_value_error() -> None:
    with pytest.raises(ValueError):
        layout.marker_key("c", "id-\udc00x")
    with pytest.raises(ValueError):
        audit_items.shard_item_key("p" * 2045, "#")
    assert audit_items.shard_item_key("202611211000", "#")["pk"]["S"] == "AUQ#202611211000"


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_given_buckets_when_keyed_then_sort_keys_order_like_indexes(a: int, b: int) -> None:
    ka = layout.bucket_key("c", Bucket("hour", a))["sk"]["S"]
    kb = layout.bucket_key("c", Bucket("hour", b))["sk"]["S"]
    assert (ka < kb) == (a < b)


@given(st.integers(0, 10**40 - 1), st.one_of(st.none(), st.integers(0, 24)), st.integers(0, 10**40 - 1))
def test_given_any_event_position_when_judged_against_a_day_items_spill_then_inline_exactly_below_it(
    sequence: int, pack_index: int | None, spilled_at: int
) -> None:
    position = layout.event_position(str(sequence), pack_index)
    spill = layout.event_position(str(spilled_at), None)
    assert position is not None and spill is not None
    assert layout.held_inline(layout.NOT_SPILLED, position)  # inline so far: every event
    assert not layout.held_inline(layout.FROM_START, position)  # hours from the start
    assert not layout.held_inline(None, position)  # no x: nothing inline
    assert layout.held_inline(spill, position) == (sequence < spilled_at)


def test_given_a_day_item_when_its_inline_minutes_read_then_only_inline_attributes_count() -> None:
    item = {
        layout.inline_attribute(0): {"N": "2"},
        layout.inline_attribute(1439): {"N": "1"},
        "ic": {"N": "3"},
        "m05": {"N": "7"},
        "n": {"N": "9"},
        "id": {"S": "x"},
    }
    assert layout.inline_minutes(item) == {0: 2, 1439: 1}
    assert layout.spill_attribute(layout.shard_attribute("shard-1")).startswith("x:")
