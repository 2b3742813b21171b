"""An event's dimensions and values: what it may be grouped by and what may be summed, with their
bounds, declared here only. Pure. Why a sum never outgrows DynamoDB's 38 digits: docs/counting.md,
"Values and their sums"; what is kept per value: "Dimensions, values, filters and breakdowns"."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from chalicelib.core import inputs, validation
from chalicelib.core.errors import ValidationError

MAX_DIMENSIONS = 4
MAX_VALUES = 8
NAME_MAX_CHARS = 64
DIMENSION_VALUE_MAX_CHARS = 128
VALUE_INTEGER_DIGITS = 18
VALUE_FRACTION_DIGITS = 6
# What a sum may grow by beyond one value's digits and still fit DynamoDB's 38 (docs/counting.md).
SUM_HEADROOM_DIGITS = inputs.MAX_NUMBER_DIGITS - VALUE_INTEGER_DIGITS - VALUE_FRACTION_DIGITS
VALUE_STEP = Decimal(1).scaleb(-VALUE_FRACTION_DIGITS)  # 0.000001
VALUE_MAX = Decimal(10**VALUE_INTEGER_DIGITS) - VALUE_STEP  # 999999999999999999.999999
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def dimensions(raw: Any, field: str) -> dict[str, str]:
    """`raw` as an event's dimensions (absent or null: none); ValidationError naming `field`."""
    found: dict[str, str] = {}
    for key, value, where in _entries(raw, field, "dimension", MAX_DIMENSIONS, "strings"):
        found[key] = inputs.text(validation.text(value, where, DIMENSION_VALUE_MAX_CHARS), where)
    return found


def values(raw: Any, field: str) -> dict[str, Decimal]:
    """`raw` as an event's values (absent or null: none), as exact decimals in their stored form
    (inputs.canonical); ValidationError naming `field`."""
    found: dict[str, Decimal] = {}
    for key, value, where in _entries(raw, field, "value", MAX_VALUES, "numbers"):
        if isinstance(value, bool) or not isinstance(value, (int, Decimal, float)):
            raise ValidationError(f"{where} must be a number")
        found[key] = summable(Decimal(repr(value)) if isinstance(value, float) else value, where)
    return found


def _entries(raw: Any, field: str, kind: str, most: int, of: str) -> Iterator[tuple[str, Any, str]]:
    """Each name of `raw` (a JSON object of at most `most` names; absent or null: none), its value and
    the value's field, the name checked before its value."""
    if raw is None:
        return
    if not isinstance(raw, Mapping):
        raise ValidationError(f"{field} must be a JSON object of {kind} names to {of}")
    if len(raw) > most:
        raise ValidationError(f"{field} holds {len(raw)} {kind}s; at most {most} are allowed")
    for key, value in raw.items():
        yield key, value, f"{field}.{_name(key, field)}"


def summable(value: int | Decimal, field: str) -> Decimal:
    """`value` in its stored form, or ValidationError naming `field` (docs/counting.md, "Values and their sums")."""
    try:
        exact = inputs.canonical(inputs.number(value, field))
    except ValidationError:
        exact = None
    if exact is None or exact.adjusted() >= VALUE_INTEGER_DIGITS or _exponent(exact) < -VALUE_FRACTION_DIGITS:
        raise ValidationError(
            f"{field} must be a number of at most {VALUE_INTEGER_DIGITS} digits before the decimal point and "
            f"{VALUE_FRACTION_DIGITS} after it (from -{VALUE_MAX} to {VALUE_MAX}), so that its sums fit "
            "DynamoDB's 38 digits"
        )
    return exact


def _exponent(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)  # finite: inputs.number
    return exponent


def _name(key: Any, field: str) -> str:
    if not isinstance(key, str) or not NAME_PATTERN.fullmatch(key):
        shown = ascii(key)[:70] if isinstance(key, str) else repr(key)
        raise ValidationError(
            f"{field} has the name {shown}: names are 1-{NAME_MAX_CHARS} characters of A-Z a-z 0-9 _ . -"
        )
    return key
