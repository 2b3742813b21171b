"""Which counters exist: `GET /counters`, listed by core.catalog as counters are counted
(bucket_writes._needs_listing says when). docs/design.md, "Which names exist"; its cost:
docs/counting.md, "Cost"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.core import catalog, pager, times, validation
from chalicelib.core.aws import DynamoDB
from chalicelib.core.settings import Settings

KIND = "counters"


def list_counters(dynamodb: DynamoDB, settings: Settings, expiry: Mapping[str, int], now_ms: int) -> int:
    """List each counter of `expiry` (counter -> its day bucket's expiry, epoch s) as counted
    now (an entry that already lives longer keeps its life). Returns the writes made."""
    return catalog.log(dynamodb, settings, KIND, expiry, now_ms)


def listing(dynamodb: DynamoDB, settings: Settings, params: dict[str, str], now_ms: int) -> dict[str, Any]:
    """`{"counters": [{"name", "last_counted"}], "next"}`, in name order, `limit` (1-1000, 100) a page."""
    request = pager.page_request(params, lambda name: validation.name(name, "cursor"))
    entries, cursor = catalog.page(dynamodb, settings, KIND, request, now_ms)
    return {
        "counters": [{"name": e.name, "last_counted": times.iso(e.last_seen_ms)} for e in entries],
        "next": cursor,
    }
