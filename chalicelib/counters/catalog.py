"""Which counters exist: `GET /counters`, written as counters are counted.

A counter's catalog entry (core.catalog, packed: `CATALOG#counters#log`, then its pages) lives
as long as its latest-expiring day bucket (the day's end plus the longest retention of its
events), so the listing shows every counter a window can still find events for, and drops it
when they have all expired. The stream handler names a counter in its batch's one log item when
the counter's day bucket was created or made to live longer, which the bucket's own UpdateItem
says (it returns the old item), and again for a day bucket whose records it found applied (a
redelivery: the delivery that created the bucket may have died before listing it). So a batch
costs one log write (its write units grow with the bytes of the names it lists, about a
kilobyte per 50 counters) whatever the number of counters new that day, and the fold shares a
page rewrite among the counters of a page; `last_counted` is the time the counter's latest day
was first counted: accurate to the day.
"""

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
