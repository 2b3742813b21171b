"""Parsing of the values every route shares: names, durations, integers. Pure.

Times are parsed and formatted by core.times."""

from __future__ import annotations

import re
from typing import Any

from chalicelib.core.errors import ValidationError

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
DURATION_PATTERN = re.compile(r"(\d{1,6})([mhd])")
DURATION_MINUTES = {"m": 1, "h": 60, "d": 1440}


def name(value: Any, field: str = "name") -> str:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise ValidationError(f"{field} must be 1-200 characters of A-Z a-z 0-9 _ . : -")
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


def integer(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{field} must be an integer")
    if not low <= value <= high:
        raise ValidationError(f"{field} must be between {low} and {high}")
    return value
