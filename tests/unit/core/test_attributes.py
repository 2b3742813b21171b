"""core.attributes: stored attribute values read into Python values, one way."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import attributes

ITEM = {
    "pk": {"S": "CTR#jobs"},
    "sk": {"S": "h#493055"},
    "n": {"N": "42"},
    "t1": {"N": "-0012.3400"},
    "salt": {"B": b"\x00\x01"},
    "scopes": {"SS": ["read", "admin"]},
    "origins": {"L": [{"S": "https://a.example"}, {"S": "https://b.example"}]},
}


def test_given_an_item_then_each_kind_reads_as_its_python_value() -> None:
    assert attributes.key_of(ITEM) == ("CTR#jobs", "h#493055")
    assert (attributes.partition_key(ITEM), attributes.sort_key(ITEM)) == ("CTR#jobs", "h#493055")
    assert attributes.integer(ITEM, "n") == 42
    assert attributes.decimal(ITEM, "t1") == Decimal("-12.34")
    assert attributes.binary(ITEM, "salt") == b"\x00\x01"
    assert attributes.string_set(ITEM, "scopes") == {"read", "admin"}
    assert attributes.text_list(ITEM, "origins") == ("https://a.example", "https://b.example")


def test_given_an_absent_attribute_then_its_default_or_none_else_a_key_error() -> None:
    assert attributes.integer(ITEM, "m07", 0) == 0
    assert attributes.text(ITEM, "note", "") == ""
    assert attributes.decimal(ITEM, "t2", Decimal(0)) == 0
    assert attributes.optional_integer(ITEM, "revoked_ms") is None
    assert attributes.optional_text(ITEM, "prefix") is None
    assert attributes.optional_integer(ITEM, "n") == 42
    assert attributes.text_list(ITEM, "none") == ()
    for read in (attributes.integer, attributes.text, attributes.decimal, attributes.binary):
        with pytest.raises(KeyError):
            read(ITEM, "absent")


def test_given_a_default_then_a_stored_value_still_wins() -> None:
    assert attributes.integer(ITEM, "n", 0) == 42
    assert attributes.text(ITEM, "pk", "") == "CTR#jobs"


@given(st.lists(st.tuples(st.text(min_size=1), st.text(min_size=1)), unique=True))
def test_given_items_of_a_batch_read_then_each_found_by_its_key(keys: list[tuple[str, str]]) -> None:
    items = [{"pk": {"S": pk}, "sk": {"S": sk}, "n": {"N": str(i)}} for i, (pk, sk) in enumerate(keys)]
    found = attributes.by_key(items)
    assert {key: attributes.integer(item, "n") for key, item in found.items()} == {k: i for i, k in enumerate(keys)}
