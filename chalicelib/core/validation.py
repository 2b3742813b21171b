"""Parsing of the values every route shares: names, times, durations. Pure."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from chalicelib.core import inputs
from chalicelib.core.errors import ValidationError

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
DURATION_PATTERN = re.compile(r"(\d{1,6})([mhd])")
DURATION_MINUTES = {"m": 1, "h": 60, "d": 1440}
TIME_MAX_CHARS = 64  # the longest ISO-8601 time is about 40 characters
# Earliest and latest times accepted, to catch seconds sent as milliseconds and the like.
MIN_TIME_MS = 946_684_800_000  # 2000-01-01
MAX_TIME_MS = 4_102_444_800_000  # 2100-01-01
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MS = timedelta(milliseconds=1)


def name(value: Any, field: str = "name") -> str:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise ValidationError(f"{field} must be 1-200 characters of A-Z a-z 0-9 _ . : -")
    return value


def time_ms(value: Any, field: str = "time") -> int:
    """Epoch milliseconds (integer) or an ISO-8601 string with a zone, as epoch ms."""
    if isinstance(value, bool):
        raise ValidationError(f"{field} must be epoch milliseconds or an ISO-8601 time with a zone")
    if isinstance(value, int):
        result = value
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > TIME_MAX_CHARS:
            raise ValidationError(f"{field} is longer than {TIME_MAX_CHARS} characters")
        if text.isdigit():  # any Unicode digit: only ASCII ones are accepted, with a clear answer
            result = inputs.digits(text, field, 16)
        else:
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError as exc:
                raise ValidationError(f"{field} is not an ISO-8601 time: {value!r}") from exc
            if parsed.tzinfo is None:
                raise ValidationError(f"{field} needs a zone (for example Z or +00:00): {value!r}")
            result = (parsed - EPOCH) // ONE_MS  # integer math: floats lose milliseconds
    else:
        raise ValidationError(f"{field} must be epoch milliseconds or an ISO-8601 time with a zone")
    if not MIN_TIME_MS <= result < MAX_TIME_MS:
        raise ValidationError(f"{field} must lie between 2000-01-01 and 2100-01-01 (epoch milliseconds)")
    return result


def iso(t_ms: int) -> str:
    """Epoch milliseconds as an ISO-8601 UTC string with millisecond precision."""
    moment = EPOCH + timedelta(milliseconds=t_ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t_ms % 1000:03d}Z"


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
