"""Capacity arithmetic the benchmarks rely on (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.ddb_meter import item_size, read_units, write_units


def test_given_known_items_when_sized_then_names_plus_values() -> None:
    assert item_size({"pk": {"S": "abc"}}) == 2 + 3
    assert item_size({"views": {"N": "12345"}}) == 5 + 4
    assert item_size({"s": {"S": "é"}}) == 1 + 2


@given(st.integers(1, 10**6))
def test_given_any_size_when_units_computed_then_started_kilobytes_and_half_for_eventual_reads(size: int) -> None:
    assert (write_units(size) - 1) * 1024 < size <= write_units(size) * 1024
    assert read_units(size, consistent=False) * 2 == read_units(size, consistent=True)
    assert (read_units(size, True) - 1) * 4096 < size <= read_units(size, True) * 4096
