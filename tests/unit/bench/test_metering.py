"""AWS's capacity rules as the benchmarks price them (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.metering import attribute_size, item_size, number_size, read_units, write_units


def test_given_strings_when_sized_then_utf8_bytes_of_name_and_value() -> None:
    assert item_size({"pk": {"S": "abc"}}) == 2 + 3
    assert item_size({"s": {"S": "é"}}) == 1 + 2
    assert item_size({"é": {"S": ""}}) == 2


def test_given_numbers_when_sized_then_two_significant_digits_a_byte_plus_one() -> None:
    assert attribute_size({"N": "12345"}) == 3 + 1
    assert attribute_size({"N": "1234"}) == 2 + 1
    assert attribute_size({"N": "-0012.3400"}) == 2 + 1  # 1234: zeros and sign not stored
    assert attribute_size({"N": "1795000000000"}) == 2 + 1  # 1795
    assert attribute_size({"N": "0"}) == 1


def test_given_binary_bool_and_null_when_sized_then_raw_bytes_and_one_byte() -> None:
    assert attribute_size({"B": b"\x00" * 10}) == 10
    assert attribute_size({"BOOL": False}) == 1
    assert attribute_size({"NULL": True}) == 1


def test_given_sets_when_sized_then_sum_of_members() -> None:
    assert attribute_size({"SS": ["a", "bcd"]}) == 4
    assert attribute_size({"NS": ["1", "123"]}) == 2 + 3
    assert attribute_size({"BS": [b"ab", b"c"]}) == 3


def test_given_lists_and_maps_when_sized_then_three_bytes_plus_one_per_element() -> None:
    assert attribute_size({"L": []}) == 3
    assert attribute_size({"M": {}}) == 3
    assert attribute_size({"L": [{"S": "ab"}, {"N": "7"}]}) == 3 + (1 + 2) + (1 + 2)
    assert attribute_size({"M": {"ab": {"S": "xyz"}}}) == 3 + 1 + 2 + 3
    assert item_size({"m": {"M": {"l": {"L": [{"BOOL": True}]}}}}) == 1 + 3 + (1 + 1 + (3 + 1 + 1))


def test_given_unknown_type_when_sized_then_refused() -> None:
    with pytest.raises(ValueError):
        attribute_size({"X": "?"})


def test_given_kilobyte_boundaries_when_writing_then_one_unit_per_started_kb_doubled_in_transactions() -> None:
    assert write_units(0) == 1
    assert write_units(1024) == 1
    assert write_units(1025) == 2
    assert write_units(2048) == 2
    assert write_units(1025, transactional=True) == 4


def test_given_4kb_boundaries_when_reading_then_one_unit_per_started_4kb_halved_when_eventual() -> None:
    assert read_units(0, consistent=True) == 1
    assert read_units(4096, consistent=True) == 1
    assert read_units(4097, consistent=True) == 2
    assert read_units(4096, consistent=False) == 0.5
    assert read_units(4097, consistent=False) == 1


@given(st.integers(0, 10**6))
def test_given_any_size_when_units_computed_then_started_blocks_with_a_minimum_of_one(size: int) -> None:
    assert (write_units(size) - 1) * 1024 < max(size, 1) <= write_units(size) * 1024
    assert write_units(size, transactional=True) == 2 * write_units(size)
    assert (read_units(size, True) - 1) * 4096 < max(size, 1) <= read_units(size, True) * 4096
    assert read_units(size, consistent=False) * 2 == read_units(size, consistent=True)


@given(st.text(alphabet="123456789", min_size=1, max_size=38), st.integers(0, 5), st.integers(0, 5))
def test_given_padded_numbers_when_sized_then_padding_is_free(digits: str, leading: int, trailing: int) -> None:
    assert number_size("0" * leading + digits + "0" * trailing) == number_size(digits)
