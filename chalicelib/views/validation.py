"""View events as clients send them: the one view shape, its bounds and the horizon. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from chalicelib.core import inputs, times, validation
from chalicelib.core.errors import ValidationError

MAX_BATCH = 25
URL_MAX_CHARS = 2048
CLIENT_ID_MAX_CHARS = 256
VIEW_FIELDS = {"url", "time", "clientId"}


@dataclass(frozen=True)
class View:
    url: str
    time_ms: int
    client_id: str


def parse_body(body: Any) -> list[View]:
    """One view or {"views": [...]}; one bad view rejects the whole request."""
    if not isinstance(body, dict):
        raise ValidationError('the body must be a JSON object: one view or {"views": [...]}')
    if "views" in body:
        if set(body) != {"views"}:
            raise ValidationError('a batch body holds only "views"')
        raw = body["views"]
        if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_BATCH:
            raise ValidationError(f"views must be a list of 1 to {MAX_BATCH} views")
        return [parse_view(item, f"views[{i}]") for i, item in enumerate(raw)]
    return [parse_view(body, "view")]


def parse_view(raw: Any, where: str = "view") -> View:
    if not isinstance(raw, dict):
        raise ValidationError(f"{where} must be a JSON object")
    validation.known_fields(raw, VIEW_FIELDS, where)
    url = text(raw.get("url"), f"{where}.url", URL_MAX_CHARS)
    if "time" not in raw:
        # The time is part of what makes a view unique: a default of "now" would count retries.
        raise ValidationError(f"{where}.time is required")
    t_ms = times.parse(raw["time"], f"{where}.time")
    client_id = text(raw.get("clientId"), f"{where}.clientId", CLIENT_ID_MAX_CHARS)
    return View(url, t_ms, client_id)


# A character that is not blank to Python (str.isspace) nor to ECMAScript, spelled out:
# docs/api.md, "The contract".
NOT_BLANK = r"[^\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
_NOT_BLANK = re.compile(rf".*{NOT_BLANK}.*", re.DOTALL)


def text(value: Any, field: str, max_chars: int) -> str:
    says = "a non-blank string of {span} characters"
    # Lone surrogates refused too: its key is a hash of its UTF-8 bytes.
    return inputs.text(validation.text(value, field, max_chars, pattern=_NOT_BLANK, says=says), field)


def check_time(view: View, now_ms: int, horizon_s: int, future_skew_s: int | None, where: str = "view") -> None:
    """Refuse a view past the horizon or, with a skew (at the door), too far ahead (docs/design.md, "At most once")."""
    age_ms = now_ms - view.time_ms
    if age_ms >= horizon_s * 1000:
        raise ValidationError(
            f"{where}.time is {age_ms // times.DAY_MS} days old: views older than the horizon of "
            f"{horizon_s * 1000 // times.DAY_MS} days (VIEW_HORIZON_SECONDS) cannot be counted exactly once"
        )
    if future_skew_s is not None:
        times.not_ahead(view.time_ms, now_ms, future_skew_s, f"{where}.time")
