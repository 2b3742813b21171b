"""DynamoDB's documented limits, in one place, quoted in docs/guarantees.md. Business code sizes its
writes by these; the emulator (tools/moto_patches.py) refuses by the same numbers."""

from __future__ import annotations

import re
from decimal import Decimal

KB = 1024
MB = 1024 * KB

# Number: "up to 38 digits of precision", positive or negative, or zero, magnitude between
# 1E-130 and 9.9999999999999999999999999999999999999E+125.
NUMBER_DIGITS = 38
NUMBER_MAX = Decimal("9.9999999999999999999999999999999999999E+125")
NUMBER_MIN = Decimal("1E-130")
# What DynamoDB parses as a number: no spaces, no NaN or Infinity, no underscores.
NUMBER_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

ITEM_BYTES = 400 * KB
PARTITION_KEY_BYTES = 2048
SORT_KEY_BYTES = 1024

EXPRESSION_BYTES = 4 * KB  # any one expression string
PLACEHOLDER_BYTES = 255  # one expression attribute name (#n) or value (:v)
SUBSTITUTION_BYTES = 2 * MB  # all ExpressionAttributeNames and ExpressionAttributeValues of a request

TRANSACTION_ITEMS = 100
TRANSACTION_BYTES = 4 * MB

BATCH_GET_KEYS = 100
BATCH_GET_BYTES = 16 * MB  # past it, the rest of the keys come back as UnprocessedKeys
BATCH_WRITE_REQUESTS = 25
BATCH_WRITE_BYTES = 16 * MB


def number_fault(value: Decimal) -> str | None:
    """Why DynamoDB cannot store `value` ("digits", "overflow", "underflow"), or None if it can."""
    if not value.is_finite():
        return "digits"
    if value.is_zero():
        return None
    # The digits DynamoDB keeps: leading and trailing zeros are trimmed (context-free, exact).
    if len("".join(map(str, value.as_tuple().digits)).strip("0")) > NUMBER_DIGITS:
        return "digits"
    magnitude = value.copy_abs()
    if magnitude > NUMBER_MAX:
        return "overflow"
    if magnitude < NUMBER_MIN:
        return "underflow"
    return None
