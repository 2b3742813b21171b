"""View events: validation, the queue message format and the counts-table key layout. Pure.

Every item of a URL shares one partition, "URL#<sha256 of the url>" (a URL may be longer
than a key may be, so it is hashed):
    sk "TOTAL"                                the counter, attribute "views"
    sk "V#<iso time>#<sha256 of clientId>"    a marker: one view event (policy "event")
    sk "D#<iso day>#<sha256 of clientId>"     a marker: one client on one day ("client-day")
A marker's sort key is what makes a view unique, and it starts with the view's time so the
markers of a time range are one Query.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from chalicelib.core import inputs, keyspace, validation
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import VIEW_DEDUP_POLICIES

MAX_BATCH = 25
URL_MAX_CHARS = 2048
CLIENT_ID_MAX_CHARS = 256
VIEW_FIELDS = {"url", "time", "clientId"}
COUNTER_SK = "TOTAL"
DAY_MS = 86_400_000
POLICY_PREFIX = {"event": "V#", "client-day": "D#"}
DEDUP_POLICIES = VIEW_DEDUP_POLICIES
assert set(POLICY_PREFIX) == set(DEDUP_POLICIES)


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


def chunks(groups: Iterable[tuple[str, list[Any]]], max_items: int) -> list[list[tuple[str, list[Any]]]]:
    """Pack per-URL groups of markers into transactions of at most max_items items.

    A group of k markers costs k + 1 items (its markers and one counter update); a group too
    large for one transaction is split, each part bringing its own counter update.
    """
    result: list[list[tuple[str, list[Any]]]] = []
    current: list[tuple[str, list[Any]]] = []
    size = 0
    for key, members in groups:
        for start in range(0, len(members), max_items - 1):
            part = members[start : start + max_items - 1]
            if current and size + len(part) + 1 > max_items:
                result.append(current)
                current, size = [], 0
            current.append((key, part))
            size += len(part) + 1
    if current:
        result.append(current)
    return result


def halves(chunk: list[tuple[str, list[Any]]]) -> list[list[tuple[str, list[Any]]]]:
    """A transaction's groups split in two (a lone group's members, if it is alone); [] for one member."""
    if len(chunk) > 1:
        middle = len(chunk) // 2
        return [chunk[:middle], chunk[middle:]]
    ((key, members),) = chunk
    if len(members) > 1:
        middle = len(members) // 2
        return [[(key, members[:middle])], [(key, members[middle:])]]
    return []
