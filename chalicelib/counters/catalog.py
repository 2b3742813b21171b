"""Which counters exist: `GET /counters`, written as counters are counted.

The stream handler calls `record` once per batch with the events it is about to count. A
counter's catalog item (`CATALOG#counters` / `<counter>`) is written at most once per hour per
process, whatever the event rate, and expires with the latest-expiring bucket of the batch that
wrote it (its day's end plus the event's retention), so the listing shows the counters a window
can still find events for. (A batch of older events written in a later hour may shorten that
expiry; the counter is listed again as soon as it is counted again.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chalicelib.core import catalog, pager, timebuckets, times, validation
from chalicelib.core.aws import DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.events.ingest import Event

KIND = "counters"
_recent = catalog.Recent()


def record(dynamodb: DynamoDB, settings: Settings, events: Iterable[Event], now_ms: int) -> int:
    """Note the counters of `events` as counted now; returns the writes made (usually 0)."""
    expiry: dict[str, int | None] = {}
    for event in events:
        _, day = timebuckets.buckets_for(event.time_ms)
        expires = day.end_ms // 1000 + event.retention_seconds
        expiry[event.counter] = max(expiry.get(event.counter) or 0, expires)
    return catalog.touch(dynamodb, settings, KIND, _recent, expiry, now_ms)


def listing(dynamodb: DynamoDB, settings: Settings, params: dict[str, str], now_ms: int) -> dict[str, Any]:
    """`{"counters": [{"name", "last_counted"}], "next"}`, in name order, `limit` (1-1000, 100) a page."""
    request = pager.page_request(params, lambda name: validation.name(name, "cursor"))
    entries, cursor = catalog.page(dynamodb, settings, KIND, request, now_ms)
    return {
        "counters": [{"name": e.name, "last_counted": times.iso(e.last_seen_ms)} for e in entries],
        "next": cursor,
    }
