"""An event's dimensions and values: what it may be grouped by and what may be summed. Pure.

- `dimensions`: at most MAX_DIMENSIONS names, each mapped to a string of 1 to
  DIMENSION_VALUE_MAX_CHARS characters ("provider": "p2"). Counts and sums are kept per value of
  each dimension (breakdowns) and per combination of them (filters).
- `values`: at most MAX_VALUES names, each mapped to a number DynamoDB can store ("amount":
  12.5). Their sums are kept exactly, in decimal, beside every count.

Names in both are 1 to NAME_MAX_CHARS characters of A-Z a-z 0-9 _ . - (no colon: a filter is
written `name:value`, and the value may hold colons). These bounds are declared here only; the
API contract and the stream handler read them from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from chalicelib.core import inputs
from chalicelib.core.errors import ValidationError

MAX_DIMENSIONS = 4
MAX_VALUES = 8
NAME_MAX_CHARS = 64
DIMENSION_VALUE_MAX_CHARS = 128
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def dimensions(raw: Any, field: str) -> dict[str, str]:
    """`raw` as an event's dimensions (absent or null: none); ValidationError naming `field`."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValidationError(f"{field} must be a JSON object of dimension names to strings")
    if len(raw) > MAX_DIMENSIONS:
        raise ValidationError(f"{field} holds {len(raw)} dimensions; at most {MAX_DIMENSIONS} are allowed")
    found: dict[str, str] = {}
    for key, value in raw.items():
        shown = _name(key, field)
        if not isinstance(value, str) or not 1 <= len(value) <= DIMENSION_VALUE_MAX_CHARS:
            raise ValidationError(f"{field}.{shown} must be a string of 1-{DIMENSION_VALUE_MAX_CHARS} characters")
        found[key] = inputs.text(value, f"{field}.{shown}")
    return found


def values(raw: Any, field: str) -> dict[str, Decimal]:
    """`raw` as an event's values (absent or null: none), as exact decimals; ValidationError naming `field`."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValidationError(f"{field} must be a JSON object of value names to numbers")
    if len(raw) > MAX_VALUES:
        raise ValidationError(f"{field} holds {len(raw)} values; at most {MAX_VALUES} are allowed")
    found: dict[str, Decimal] = {}
    for key, value in raw.items():
        shown = _name(key, field)
        if isinstance(value, bool) or not isinstance(value, (int, Decimal, float)):
            raise ValidationError(f"{field}.{shown} must be a number")
        exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        inputs.number(exact, f"{field}.{shown}")
        found[key] = exact
    return found


def _name(key: Any, field: str) -> str:
    if not isinstance(key, str) or not NAME_PATTERN.fullmatch(key):
        shown = ascii(key)[:70] if isinstance(key, str) else repr(key)
        raise ValidationError(
            f"{field} has the name {shown}: names are 1-{NAME_MAX_CHARS} characters of A-Z a-z 0-9 _ . -"
        )
    return key
