"""An event's dimensions and values: the bounds declared in chalicelib.events.dimensions."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core.errors import ValidationError
from chalicelib.events import dimensions as d

NAMES = st.from_regex(d.NAME_PATTERN, fullmatch=True)


@given(st.dictionaries(NAMES, st.text(min_size=1, max_size=d.DIMENSION_VALUE_MAX_CHARS), max_size=d.MAX_DIMENSIONS))
def test_given_dimensions_within_bounds_when_parsed_then_kept_as_given(raw: dict[str, str]) -> None:
    assert d.dimensions(raw, "event.dimensions") == raw


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ([1], "event.dimensions must be a JSON object"),
        ({f"d{i}": "x" for i in range(5)}, "at most 4"),
        ({"": "x"}, "names are 1-64"),
        ({"a:b": "x"}, "names are 1-64"),
        ({"x" * 65: "x"}, "names are 1-64"),
        ({"provider": ""}, "event.dimensions.provider must be a string of 1-128"),
        ({"provider": "x" * 129}, "event.dimensions.provider must be a string of 1-128"),
        ({"provider": 2}, "event.dimensions.provider must be a string"),
        ({"provider": "\udc00"}, "event.dimensions.provider is not valid text"),
    ],
)
def test_given_bad_dimensions_when_parsed_then_error_names_the_field(raw: Any, named: str) -> None:
    with pytest.raises(ValidationError, match=named.replace(".", r"\.")):
        d.dimensions(raw, "event.dimensions")


def test_given_values_when_parsed_then_exact_decimals() -> None:
    parsed = d.values({"amount": Decimal("12.5"), "bytes": 1024, "f": 0.1}, "event.values")
    assert parsed == {"amount": Decimal("12.5"), "bytes": Decimal(1024), "f": Decimal("0.1")}
    assert d.values(None, "x") == {} and d.dimensions(None, "x") == {}


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ("12", "event.values must be a JSON object"),
        ({f"v{i}": 1 for i in range(9)}, "at most 8"),
        ({"a b": 1}, "names are 1-64"),
        ({"amount": "12"}, "event.values.amount must be a number"),
        ({"amount": True}, "event.values.amount must be a number"),
        ({"amount": Decimal("1E+126")}, "event.values.amount is outside DynamoDB's number range"),
        ({"amount": Decimal("1." + "1" * 38)}, "event.values.amount is outside DynamoDB's number range"),
    ],
)
def test_given_bad_values_when_parsed_then_error_names_the_field(raw: Any, named: str) -> None:
    with pytest.raises(ValidationError, match=named.replace(".", r"\.")):
        d.values(raw, "event.values")
