"""The counts-table keys of view counters (`URL#`, `VWB#`), the attributes they hold, a view's
marker name and how long a marker lives. Pure. docs/design.md, "Keys" and "Exactly once"."""

from __future__ import annotations

import hashlib
from typing import Any

from chalicelib.core import attributes, keyspace, times
from chalicelib.core.settings import VIEW_DEDUP_POLICIES
from chalicelib.core.timebuckets import Bucket, Level
from chalicelib.views.validation import View

COUNTER_SK = "TOTAL"
DAY_MS = times.DAY_MS
POLICY_PREFIX = {"event": "V#", "client-day": "D#"}
assert set(POLICY_PREFIX) == set(VIEW_DEDUP_POLICIES)
BUCKET_PREFIX: dict[Level, str] = {"hour": "h", "day": "d", "block": "b"}
PENDING_PREFIX = "p"
FLUSHES = "fv"  # on the counter item
FLUSHED = "f"  # on a bucket item


def url_pk(url: str) -> str:
    return keyspace.VIEW_URL + _digest(url)


def counter_key(url: str) -> dict[str, Any]:
    return counter_key_of(url_pk(url))


def pending_attribute(minute: int) -> str:
    """The counter item's attribute holding views of `minute` not yet moved into buckets."""
    return f"{PENDING_PREFIX}{minute}"


def pending_minutes(item: dict[str, Any] | None) -> dict[int, int]:
    """A counter item's pending views, by minute since the epoch."""
    item = item or {}
    return {
        int(name[1:]): attributes.integer(item, name)
        for name in item
        if name.startswith(PENDING_PREFIX) and name[1:].isdigit()
    }


def counter_key_of(url_pk_value: str) -> dict[str, Any]:
    return {"pk": {"S": url_pk_value}, "sk": {"S": COUNTER_SK}}


def bucket_pk(url_pk_value: str) -> str:
    """The partition of a URL's view buckets, from its counter partition `URL#<sha>`."""
    return keyspace.VIEW_BUCKET + url_pk_value.removeprefix(keyspace.VIEW_URL)


def bucket_sk(span: Bucket) -> str:
    return keyspace.index_sort_key(BUCKET_PREFIX[span.resolution], span.index)


def bucket_key(url: str, span: Bucket) -> dict[str, Any]:
    return bucket_key_of(url_pk(url), span)


def bucket_key_of(url_pk_value: str, span: Bucket) -> dict[str, Any]:
    return {"pk": {"S": bucket_pk(url_pk_value)}, "sk": {"S": bucket_sk(span)}}


def marker_sk(view: View, policy: str) -> str:
    """The view's marker name: two views of a URL are one under `policy` exactly when their names are equal."""
    t_ms = view.time_ms - view.time_ms % DAY_MS if policy == "client-day" else view.time_ms
    return f"{POLICY_PREFIX[policy]}{times.iso(t_ms)}#{_digest(view.client_id)}"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def marker_expires_at_s(time_ms: int, policy: str, horizon_s: int) -> int:
    """When a view's marker may go: the end of what it dedupes plus the horizon, rounded up to the
    second (docs/design.md, "At most once, provably: the horizon")."""
    end_ms = time_ms - time_ms % DAY_MS + DAY_MS if policy == "client-day" else time_ms + 1
    return -(-(end_ms + horizon_s * 1000) // 1000)
