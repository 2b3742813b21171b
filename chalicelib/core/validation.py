"""Parsing of the values every route shares: names, durations, integers, a body's fields (times:
core.times). Pure."""

from __future__ import annotations

import re
from collections.abc import Collection
from decimal import Decimal
from typing import Any

from chalicelib.core.errors import ValidationError

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
# ASCII digits only: `\d` would take '٣' and '２', which int() reads.
DURATION_DIGITS = 6
DURATION_PATTERN = re.compile(rf"([0-9]{{1,{DURATION_DIGITS}}})([mhd])")
DURATION_MINUTES = {"m": 1, "h": 60, "d": 1440}


def name(value: Any, field: str = "name") -> str:
    return text(value, field, 200, pattern=NAME_PATTERN, says="{span} characters of A-Z a-z 0-9 _ . : -")


def text(
    value: Any,
    field: str,
    max_chars: int,
    *,
    empty: bool = False,
    pattern: re.Pattern[str] | None = None,
    says: str = "a string of {span} characters",
) -> str:
    """`value` if it is a string of 1 (`empty`: 0) to `max_chars` characters that `pattern`, if
    given, matches in full; else ValidationError "<field> must be <says>", its {span} "1-<max>" (or
    "at most <max>"). Lone surrogates: core.inputs.text."""
    low = 0 if empty else 1
    if not isinstance(value, str) or not low <= len(value) <= max_chars or (pattern and not pattern.fullmatch(value)):
        span = f"at most {max_chars}" if empty else f"1-{max_chars}"
        raise ValidationError(f"{field} must be " + says.format(span=span))
    return value


def duration_minutes(value: Any, field: str = "window") -> int:
    """'90m', '24h', '7d' as a number of minutes."""
    match = DURATION_PATTERN.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise ValidationError(f"{field} must look like 90m, 24h or 7d")
    minutes = int(match.group(1)) * DURATION_MINUTES[match.group(2)]
    if minutes < 1:
        raise ValidationError(f"{field} must be at least one minute")
    return minutes


def whole(value: Any) -> int | None:
    """`value` as an int when it is a JSON integer (5.0 and 5E+2 are, as for JSON Schema), else
    None; a parsed body's numbers are Decimal already bounded (core.inputs)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    return None


def integer(value: Any, field: str, low: int, high: int) -> int:
    number = whole(value)
    if number is None:
        raise ValidationError(f"{field} must be an integer")
    if not low <= number <= high:
        raise ValidationError(f"{field} must be between {low} and {high}")
    return number


def known_fields(body: dict[str, Any], allowed: Collection[str], where: str = "") -> None:
    """ValidationError listing the fields of `body` not in `allowed` (sorted, cut to 200
    characters): "<where> has unknown fields: ...", or "unknown fields: ..." for a whole body."""
    unknown = ", ".join(sorted(set(body) - set(allowed)))[:200]
    if unknown:
        raise ValidationError(f"{where} has unknown fields: {unknown}" if where else f"unknown fields: {unknown}")
