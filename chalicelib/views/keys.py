"""View events: validation, the queue message format and the counts-table key layout. Pure.

Every item of a URL shares one partition, "URL#<sha256 of the url>" (a URL may be longer
than a key may be, so it is hashed):
    sk "TOTAL"                                the counter, attribute "views"
    sk "V#<iso time>#<sha256 of clientId>"    a marker: one view event (policy "event")
    sk "D#<iso day>#<sha256 of clientId>"     a marker: one client on one day ("client-day")
A marker's sort key is what makes a view unique, and it starts with the view's time so the
markers of a time range are one Query. The URL's views per bucket (chalicelib.views.windows)
have a partition of their own, "VWB#<sha256 of the url>":
    sk "h#<hour>" | "d#<day>" | "b#<block>"  (number since the epoch, 10 digits)
        attributes "n" (the bucket's views), its inner buckets' views (m00.. | h00.. | d00..),
        "expires_at"
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from chalicelib.core import inputs, keyspace, validation
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import VIEW_DEDUP_POLICIES
from chalicelib.views.windows import Span

MAX_BATCH = 25
URL_MAX_CHARS = 2048
CLIENT_ID_MAX_CHARS = 256
VIEW_FIELDS = {"url", "time", "clientId"}
COUNTER_SK = "TOTAL"
DAY_MS = 86_400_000
POLICY_PREFIX = {"event": "V#", "client-day": "D#"}
DEDUP_POLICIES = VIEW_DEDUP_POLICIES
assert set(POLICY_PREFIX) == set(DEDUP_POLICIES)
BUCKET_PREFIX = {"hour": "h", "day": "d", "block": "b"}
M = TypeVar("M")


@dataclass(frozen=True)
class View:
    url: str
    time_ms: int
    client_id: str


# -- validation ----------------------------------------------------------------------------


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
    unknown = sorted(set(raw) - VIEW_FIELDS)
    if unknown:
        raise ValidationError(f"{where} has unknown fields: {', '.join(unknown)}")
    url = text(raw.get("url"), f"{where}.url", URL_MAX_CHARS)
    if "time" not in raw:
        # The time is part of what makes a view unique: a default of "now" would count retries.
        raise ValidationError(f"{where}.time is required")
    t_ms = validation.time_ms(raw["time"], f"{where}.time")
    client_id = text(raw.get("clientId"), f"{where}.clientId", CLIENT_ID_MAX_CHARS)
    return View(url, t_ms, client_id)


def text(value: Any, field: str, max_chars: int) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= max_chars or not value.strip():
        raise ValidationError(f"{field} must be a non-blank string of 1-{max_chars} characters")
    return inputs.text(value, field)  # its key is a hash of its UTF-8 bytes


def check_time(view: View, now_ms: int, horizon_s: int, future_skew_s: int | None, where: str = "view") -> None:
    """A view is counted only while its own time is less than the horizon old (its marker lives
    that long, so no later delivery of it can count again) and, when a skew is given (at the
    door), not further in the future than clients' clocks may be off."""
    age_ms = now_ms - view.time_ms
    if age_ms >= horizon_s * 1000:
        raise ValidationError(
            f"{where}.time is {age_ms // 86_400_000} days old: views older than the horizon of "
            f"{horizon_s // 86400} days (VIEW_HORIZON_SECONDS) cannot be counted exactly once"
        )
    if future_skew_s is not None and -age_ms > future_skew_s * 1000:
        raise ValidationError(
            f"{where}.time is {-age_ms // 1000} s in the future; at most {future_skew_s} s of clock "
            "skew is allowed (MAX_FUTURE_SKEW_SECONDS)"
        )


def marker_expires_at_s(time_ms: int, policy: str, horizon_s: int) -> int:
    """When a view's marker may go: the end of what it dedupes (its millisecond, or its UTC day
    under "client-day") plus the horizon, rounded up to the second. Every view it stands for is
    refused by check_time from that moment on, so no delivery finds it gone and counts again."""
    end_ms = time_ms - time_ms % DAY_MS + DAY_MS if policy == "client-day" else time_ms + 1
    return -(-(end_ms + horizon_s * 1000) // 1000)


# -- the queue message ---------------------------------------------------------------------


def to_message(view: View) -> str:
    return json.dumps({"url": view.url, "time": view.time_ms, "clientId": view.client_id}, separators=(",", ":"))


def from_message(body: str) -> View:
    """The view a queue message carries; ValidationError if it is not one."""
    return parse_view(inputs.json_body(body), "message")


# -- keys ------------------------------------------------------------------------------------


def url_pk(url: str) -> str:
    return keyspace.VIEW_URL + _digest(url)


def counter_key(url: str) -> dict[str, Any]:
    return {"pk": {"S": url_pk(url)}, "sk": {"S": COUNTER_SK}}


def bucket_pk(url_pk_value: str) -> str:
    """The partition of a URL's view buckets, from its counter partition `URL#<sha>`."""
    return keyspace.VIEW_BUCKET + url_pk_value.removeprefix(keyspace.VIEW_URL)


def bucket_sk(span: Span) -> str:
    return f"{BUCKET_PREFIX[span.level]}#{span.index:010d}"


def bucket_key(url: str, span: Span) -> dict[str, Any]:
    return {"pk": {"S": bucket_pk(url_pk(url))}, "sk": {"S": bucket_sk(span)}}


def marker_sk(view: View, policy: str) -> str:
    t_ms = view.time_ms - view.time_ms % DAY_MS if policy == "client-day" else view.time_ms
    return f"{POLICY_PREFIX[policy]}{validation.iso(t_ms)}#{_digest(view.client_id)}"


def marker_key(view: View, policy: str) -> dict[str, Any]:
    return {"pk": {"S": url_pk(view.url)}, "sk": {"S": marker_sk(view, policy)}}


def marker_range(start_ms: int, end_ms: int, policy: str) -> tuple[str, str]:
    """Sort keys bounding the markers of views in [start, end), both inclusive (for BETWEEN:
    DynamoDB allows no key attribute in a filter). "~" sorts after every hex digit."""
    prefix = POLICY_PREFIX[policy]
    return f"{prefix}{validation.iso(start_ms)}", f"{prefix}{validation.iso(end_ms - 1)}#~"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


# -- transactions ----------------------------------------------------------------------------


def chunks(
    groups: Iterable[tuple[str, list[M]]], max_items: int, spans: Callable[[M], Iterable[Hashable]]
) -> list[list[tuple[str, list[M]]]]:
    """Pack per-URL groups of markers into transactions of at most max_items items.

    A group of k markers costs k + 1 + b items: its markers, one counter update and one update
    per distinct bucket (`spans`) of those markers. A group too large for one transaction is
    split, each part bringing its own counter and bucket updates. Members are taken in the
    order given (sorted by time, a group's markers share few buckets).
    """
    result: list[list[tuple[str, list[M]]]] = []
    current: list[tuple[str, list[M]]] = []
    size = 0
    for key, members in groups:
        part: list[M] = []
        taken: set[Hashable] = set()
        for member in members:
            mine = set(spans(member))
            cost = 1 + len(mine - taken) + (0 if part else 1)
            if size + cost > max_items:
                if part:
                    current.append((key, part))
                if current:
                    result.append(current)
                current, size, part, taken = [], 0, [], set()
                cost = 2 + len(mine)
                if cost > max_items:
                    raise ValueError(f"one marker needs {cost} items, more than {max_items}")
            part.append(member)
            taken |= mine
            size += cost
        if part:
            current.append((key, part))
    if current:
        result.append(current)
    return result


def transaction_items(chunk: list[tuple[str, list[M]]], spans: Callable[[M], Iterable[Hashable]]) -> int:
    """How many items `chunks` counts for a transaction of these groups."""
    return sum(len(members) + 1 + len({s for m in members for s in spans(m)}) for _, members in chunk)
