"""An event's dimensions and values: the bounds declared in chalicelib.events.dimensions."""

from __future__ import annotations

from decimal import Context, Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from hypothesis import example, given
from hypothesis import strategies as st

from chalicelib.core.errors import ValidationError
from chalicelib.counters import topk
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
        ({"amount": Decimal("1E+126")}, "event.values.amount must be a number of at most 18 digits"),
        ({"amount": Decimal("1." + "1" * 38)}, "event.values.amount must be a number of at most 18 digits"),
        ({"amount": Decimal("NaN")}, "event.values.amount must be a number of at most 18 digits"),
    ],
)
def test_given_bad_values_when_parsed_then_error_names_the_field(raw: Any, named: str) -> None:
    with pytest.raises(ValidationError, match=named.replace(".", r"\.")):
        d.values(raw, "event.values")


# -- the values' domain: every sum DynamoDB keeps of accepted values fits its 38 digits ------------

MAX = d.VALUE_MAX
STEP = d.VALUE_STEP
# Values as a client may write them: any digits, trailing zeros, exponents near the domain and
# far beyond it (their check costs the same), either sign.
written = st.builds(
    lambda sign, digits, zeros, exponent: Decimal(f"{sign}{digits}{'0' * zeros}E{exponent}"),
    st.sampled_from(["", "-"]),
    st.integers(min_value=0, max_value=10**30).map(str),
    st.integers(min_value=0, max_value=4),
    st.integers(min_value=-40, max_value=40) | st.sampled_from([-999_999_999, 999_999_999]),
)
WIDE = Context(prec=60)  # every value within MAX has 24 digits: exact here
accepted = st.decimals(min_value=-MAX, max_value=MAX, places=d.VALUE_FRACTION_DIGITS)


def test_given_the_domain_when_its_digits_counted_then_headroom_for_10_to_the_14_sums() -> None:
    assert d.VALUE_INTEGER_DIGITS + d.VALUE_FRACTION_DIGITS + d.SUM_HEADROOM_DIGITS == 38
    assert d.SUM_HEADROOM_DIGITS == 14
    assert (Decimal("999999999999999999.999999"), Decimal("0.000001")) == (MAX, STEP)


@pytest.mark.parametrize(
    ("given_value", "stored"),
    [
        (MAX, "999999999999999999.999999"),
        (-MAX, "-999999999999999999.999999"),
        (STEP, "0.000001"),
        (-STEP, "-0.000001"),
        (Decimal("0E+999"), "0"),
        (Decimal("-0.0"), "0"),
        (Decimal("1.0000000000000000000000000000000000000000"), "1"),
        (Decimal("1E+17"), "100000000000000000"),
        (Decimal("12.500000"), "12.5"),
        (10**18 - 1, "999999999999999999"),
    ],
)
def test_given_a_value_at_the_domains_edges_when_parsed_then_accepted_in_its_shortest_form(
    given_value: Any, stored: str
) -> None:
    parsed = d.values({"amount": given_value}, "event.values")["amount"]
    assert parsed == Decimal(given_value) and str(parsed) == stored


@pytest.mark.parametrize(
    "past",
    [
        MAX + STEP,  # 10**18
        -MAX - STEP,
        Decimal("0.0000001"),
        Decimal("-0.0000005"),
        Decimal("1.0000001"),
        Decimal("1E+18"),
        Decimal("1E30"),
        Decimal("9.9999999999999999999999999999999999999E125"),
        Decimal("1E999999999"),
        Decimal("1E-999999999"),
        Decimal("Infinity"),
        10**18,
    ],
)
def test_given_a_value_one_past_the_domain_when_parsed_then_refused_naming_the_field(past: Any) -> None:
    with pytest.raises(ValidationError, match=r"event\.values\.amount must be a number of at most 18 digits"):
        d.values({"amount": past}, "event.values")


@given(written | accepted | st.integers(min_value=-(10**20), max_value=10**20))
@example(MAX)
@example(-MAX)
def test_given_any_value_when_accepted_then_in_the_domain_and_boto3_serializes_it_exactly(value: Any) -> None:
    try:
        parsed = d.values({"v": value}, "event.values")["v"]
    except ValidationError:
        exact = Decimal(value)
        assert not exact.is_finite() or exact.copy_abs() > MAX or exact.quantize(STEP, context=WIDE) != exact
        return
    assert parsed == value and parsed.copy_abs() <= MAX and parsed.quantize(STEP, context=WIDE) == parsed
    serialized = TypeSerializer().serialize(parsed)  # boto3 raises on any rounding
    assert TypeDeserializer().deserialize(serialized) == parsed


@given(st.lists(st.tuples(accepted, st.integers(min_value=1, max_value=10**14)), min_size=1, max_size=20))
@example([(MAX, 10**14)])
@example([(-MAX, 10**14)])
@example([(MAX, 10**14 // 2), (-STEP, 10**14 // 2)])
def test_given_up_to_10_to_the_14_accepted_values_when_summed_then_dynamodb_can_store_the_sum(
    many: list[tuple[Decimal, int]],
) -> None:
    # Any multiset of accepted values of at most 10**SUM_HEADROOM_DIGITS members: the sum DynamoDB's
    # ADD would reach, computed exactly, is a number it stores (boto3's serializer raises otherwise).
    scale = 10**d.SUM_HEADROOM_DIGITS / sum(k for _, k in many)
    weighted = [(v, max(1, int(k * min(1, scale)))) for v, k in many]
    assert sum(k for _, k in weighted) <= 10**d.SUM_HEADROOM_DIGITS
    total = Decimal(0)
    for value, k in weighted:
        total = topk.EXACT.add(total, topk.EXACT.multiply(d.values({"v": value}, "x")["v"], Decimal(k)))
    assert TypeDeserializer().deserialize(TypeSerializer().serialize(total)) == total


def test_given_ten_times_the_headroom_of_maximal_values_when_summed_then_past_38_digits() -> None:
    # The bound is tight: 10**15 maximal values need 39 digits, which DynamoDB's ADD refuses.
    total = topk.EXACT.multiply(MAX, Decimal(10**15))
    with pytest.raises(ArithmeticError):
        TypeSerializer().serialize(total)
