"""The door every request body and query string goes through: bounds, text, numbers, digits."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import DYNAMODB_CONTEXT, TypeDeserializer, TypeSerializer
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import inputs
from chalicelib.core.errors import ValidationError

any_text = st.text(st.characters(codec=None, categories=None), max_size=12)  # lone surrogates included
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**130), max_value=10**130)
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4),
    max_leaves=25,
)


def values_in(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(values_in(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(values_in(v) for v in value)
    return 1


def encodable(text: str) -> bool:
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def texts_in(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [*value] + [t for v in value.values() for t in texts_in(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts_in(v)]
    return [value] if isinstance(value, str) else []


def storable(number: Any) -> bool:
    """DynamoDB's documented number range, by brute force on the decimal text, less what boto3's
    context cannot carry (a digit below 1E-165)."""
    exact = Decimal(repr(number)) if isinstance(number, float) else Decimal(number)
    if exact == 0:
        return True
    mantissa, exponent = format(exact, "e").split("e")  # every digit, no rounding context
    digits = mantissa.replace("-", "").replace(".", "").rstrip("0")
    return len(digits) <= 38 and -130 <= int(exponent) <= 125 and int(exponent) - (len(digits) - 1) >= -165


def numbers_in(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers_in(v)]
    if isinstance(value, list):
        return [n for v in value for n in numbers_in(v)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


@given(json_values, st.sampled_from([(",", ":"), (", ", ": ")]))
def test_given_any_json_when_bounded_then_the_bound_is_at_least_its_values(value: Any, separators: Any) -> None:
    raw = json.dumps(value, separators=separators).encode()
    assert inputs.value_bound(raw) >= values_in(value)


@given(json_values)
def test_given_any_json_when_parsed_then_accepted_exactly_when_its_text_and_numbers_are_storable(value: Any) -> None:
    raw = json.dumps(value)
    fine = all(encodable(t) for t in texts_in(value)) and all(storable(n) for n in numbers_in(value))
    try:
        parsed = inputs.json_body(raw.encode("utf-8", "surrogatepass"))
    except ValidationError:
        assert not fine
        return
    assert fine
    assert parsed == json.loads(raw, parse_float=Decimal)


@given(st.text(max_size=8))
def test_given_any_text_when_read_as_digits_then_only_ascii_digits_accepted(text: str) -> None:
    stripped = text.strip()
    expected = stripped.isascii() and stripped.isdigit() and len(stripped) <= 6
    try:
        assert inputs.digits(text, "limit", 6) == int(stripped) and expected
    except ValidationError:
        assert not expected


@pytest.mark.parametrize("raw", [b"[" * 41 + b"]" * 41, b"[" * 5000 + b"]" * 5000, b'{"a": ' * 41 + b"1" + b"}" * 41])
def test_given_nesting_past_the_limit_when_parsed_then_refused(raw: bytes) -> None:
    with pytest.raises(ValidationError, match="nested deeper"):
        inputs.json_body(raw)


def test_given_nesting_at_the_limit_when_parsed_then_accepted() -> None:
    assert inputs.json_body(b"[" * 40 + b"]" * 40) is not None


def test_given_a_body_over_the_cap_when_parsed_then_refused_before_decoding() -> None:
    with pytest.raises(ValidationError, match="larger than"):
        inputs.json_body(b"\xff" * (inputs.MAX_BODY_BYTES + 1))


# Numbers as a client may write them: up to 45 digits, trailing zeros among them, any exponent
# near DynamoDB's range and far beyond it, either sign.
written_numbers = st.builds(
    lambda sign, digits, zeros, exponent: Decimal(f"{sign}{digits}{'0' * zeros}E{exponent}"),
    st.sampled_from(["", "-"]),
    st.integers(min_value=0, max_value=10**40).map(str),
    st.integers(min_value=0, max_value=5),
    st.integers(min_value=-200, max_value=200) | st.sampled_from([-999_999_999, 999_999_999]),
)


def test_given_the_sdks_decimal_context_when_read_then_its_finest_digit_is_the_doors() -> None:
    assert DYNAMODB_CONTEXT.Etiny() == inputs.MIN_DIGIT_EXPONENT


@given(written_numbers | st.integers(min_value=-(10**45), max_value=10**45))
def test_given_any_number_when_checked_then_accepted_exactly_when_storable_and_its_stored_form_round_trips(
    number: Decimal | int,
) -> None:
    try:
        inputs.number(number, "attributes.n")
    except ValidationError as exc:
        assert not storable(number)
        assert "attributes.n is outside DynamoDB's number range" in str(exc)
        return
    assert storable(number)
    stored = inputs.canonical(number)
    assert stored == number
    serialized = TypeSerializer().serialize(stored)  # raises on any rounding, as on a write
    assert TypeDeserializer().deserialize(serialized) == number
    assert serialized["N"] == str(stored) and serialized["N"] != "-0"


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("0E+999", "0"),
        ("-0.0", "0"),
        ("1.0000000000000000000000000000000000000000", "1"),  # 41 digits, 40 of them trailing zeros
        ("10000000000000000000000000000000000000000", "1E+40"),  # 41 digits as an integer
        ("1.50", "1.5"),
        ("1E3", "1000"),
        ("9.9999999999999999999999999999999999999E125", "9.9999999999999999999999999999999999999E+125"),
        ("1E-130", "1E-130"),
    ],
)
def test_given_a_number_written_with_zeros_or_an_exponent_when_stored_then_its_shortest_form(
    written: str, stored: str
) -> None:
    parsed = inputs.json_body(f'{{"n": {written}}}'.encode())["n"]
    assert str(inputs.canonical(parsed)) == stored
    assert TypeSerializer().serialize(inputs.canonical(parsed)) == {"N": stored}


@pytest.mark.parametrize(
    "written",
    [
        "12345678901234567890123456789012345678901",  # 41 significant digits
        "1E+126",
        "1E-131",
        "1E999999999",
        "-1E-999999999",
        "1.234567890123456789012345678901234567E-130",  # DynamoDB's range; a digit below boto3's 1E-165
    ],
)
def test_given_a_number_outside_the_range_when_parsed_then_refused_naming_where(written: str) -> None:
    with pytest.raises(ValidationError, match=r"body\.a\[1\] is outside DynamoDB's number range"):
        inputs.json_body(f'{{"a": [0, {written}]}}'.encode())


@pytest.mark.parametrize(
    "written", ["1E99999999999999999999999", "-1E-99999999999999999999999", "0E+99999999999999999999"]
)
def test_given_an_exponent_past_any_decimal_range_when_parsed_then_refused_not_raised(written: str) -> None:
    # Python's decimal refuses exponents past 10**18 with InvalidOperation, not ValueError.
    with pytest.raises(ValidationError, match="exponent is out of any range"):
        inputs.json_body(f'{{"a": [0, {written}]}}'.encode())


@pytest.mark.parametrize(("tail", "accepted"), [(b"", True), (b"1", False)])
def test_given_a_number_of_millions_of_digits_when_checked_then_judged_in_bounded_time(
    tail: bytes, accepted: bool
) -> None:
    # 5 million trailing zeros are 1; one more nonzero digit is 5,000,002 significant digits.
    # Judged by rounding in C: about 0.3 s here with the parse, where building the number's digit
    # tuple took 7 s. The bound is generous for busy machines.
    raw = b'{"n": 1.' + b"0" * 5_000_000 + tail + b"}"
    started = time.monotonic()
    try:
        parsed = inputs.json_body(raw)
        assert accepted and inputs.canonical(parsed["n"]) == 1
    except ValidationError:
        assert not accepted
    assert time.monotonic() - started < 3
