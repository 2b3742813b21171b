"""Time: its units, and every text form Tally parses a time from or writes one in. Pure. Epoch
milliseconds (UTC) inside, integer arithmetic throughout (floats lose milliseconds)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from chalicelib.core import inputs, validation
from chalicelib.core.errors import ValidationError

MINUTE_MS = 60_000
QUARTER_HOUR_MS = 15 * MINUTE_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

TIME_MAX_CHARS = 64  # the longest ISO-8601 time is about 40 characters
TIME_DIGITS_MAX = 16  # epoch milliseconds in digits, leading zeros included
# Earliest and latest times accepted, to catch seconds sent as milliseconds and the like.
MIN_TIME_MS = 946_684_800_000  # 2000-01-01
MAX_TIME_MS = 4_102_444_800_000  # 2100-01-01
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MS = timedelta(milliseconds=1)
_COMPACT = "%Y%m%dT%H%M%S"
Label = Callable[[int], str]  # an epoch minute as an answer writes it


def parse(value: Any, field: str = "time") -> int:
    """Epoch milliseconds (integer) or an ISO-8601 string with a zone, as epoch ms."""
    whole = validation.whole(value)
    if whole is not None:
        result = whole
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > TIME_MAX_CHARS:
            raise ValidationError(f"{field} is longer than {TIME_MAX_CHARS} characters")
        if text.isdigit():  # any Unicode digit: only ASCII ones are accepted, with a clear answer
            result = inputs.digits(text, field, TIME_DIGITS_MAX)
        else:
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError as exc:
                raise ValidationError(f"{field} is not an ISO-8601 time: {value!r}") from exc
            if parsed.tzinfo is None:
                raise ValidationError(f"{field} needs a zone (for example Z or +00:00): {value!r}")
            result = (parsed - EPOCH) // ONE_MS
    else:
        raise ValidationError(f"{field} must be epoch milliseconds or an ISO-8601 time with a zone")
    if not MIN_TIME_MS <= result < MAX_TIME_MS:
        raise ValidationError(f"{field} must lie between 2000-01-01 and 2100-01-01 (epoch milliseconds)")
    return result


def not_ahead(t_ms: int, now_ms: int, skew_s: int, field: str = "time") -> int:
    """`t_ms`, unless it lies more than `skew_s` seconds after now: clients' clocks may be off by
    that much (MAX_FUTURE_SKEW_SECONDS), no more. The one check every route taking a time applies."""
    if t_ms > now_ms + skew_s * 1000:
        raise ValidationError(
            f"{field} is {(t_ms - now_ms) // 1000} s in the future; at most {skew_s} s of clock skew "
            "is allowed (MAX_FUTURE_SKEW_SECONDS)"
        )
    return t_ms


def _moment(t_ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=t_ms)


def iso(t_ms: int) -> str:
    """Epoch milliseconds as an ISO-8601 UTC string with millisecond precision."""
    return _moment(t_ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t_ms % 1000:03d}Z"


def utc_label(minute: int) -> str:
    """An epoch minute as an answer without a zone writes it: ISO UTC."""
    return iso(minute * MINUTE_MS)


def quarter_hour(t_ms: int) -> str:
    """'YYYYMMDDHHXX' with XX in 00/15/30/45: the UTC quarter hour holding t_ms."""
    moment = _moment(t_ms)
    return moment.strftime("%Y%m%d%H") + f"{moment.minute - moment.minute % 15:02d}"


def parse_quarter_hour(text: str) -> int:
    """Epoch ms of the start of a quarter hour written by quarter_hour; ValueError for an
    impossible date or a minute that does not start a quarter."""
    moment = datetime.strptime(text, "%Y%m%d%H%M").replace(tzinfo=UTC)
    if moment.minute % 15:
        raise ValueError(f"not a quarter hour: {text!r}")
    return (moment - EPOCH) // ONE_MS


def compact(t_ms: int) -> str:
    """'YYYYMMDDTHHMMSSmmmZ': a UTC time to the millisecond, as report ids hold it."""
    return f"{_moment(t_ms).strftime(_COMPACT)}{t_ms % 1000:03d}Z"


def parse_compact(seconds: str, millis: str) -> int:
    """Epoch ms of a compact time given as its 'YYYYMMDDTHHMMSS' and 'mmm' parts; ValueError
    for an impossible date."""
    return (datetime.strptime(seconds, _COMPACT).replace(tzinfo=UTC) - EPOCH) // ONE_MS + int(millis)
