"""`GET /sites/{site}/realtime`: the visitors of the last minutes and page views per minute.

Visitors: the beacon puts one small item per visitor and minute (`NOW#<site>` /
`m#<minute>#<token>`, sites.names), a put that a resend repeats harmlessly, and the read counts
the distinct tokens of the last VISITOR_MINUTES minutes in one Query, exact up to MAX_VISITOR_ITEMS.
Page views: the minute series of the site's page-view counter (counters.reads.histogram).
Why this split, how fresh each is and what it costs: docs/tracker.md, "Right now".
"""

from __future__ import annotations

import hashlib
from typing import Any

from chalicelib.core import attributes, dynamo, times
from chalicelib.core.aws import DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import translated
from chalicelib.counters import reads
from chalicelib.sites import names

VISITOR_MINUTES = 5
PAGEVIEW_MINUTES = 30
# A read counts at most this many visitor-minutes (items of about 60 bytes: one Query page of
# at most 1 MB); past it the answer says `visitors_exact: false` and is a lower bound.
MAX_VISITOR_ITEMS = 10_000
# An item is kept past its minute long enough for every read that asks for it; TTL deletes it
# later (reads do not rely on that: they ask for their minutes only).
KEEP_SECONDS = (VISITOR_MINUTES + 5) * 60
TOKEN_HEX = 16


def _token(visitor: str) -> str:
    """A value made from the visitor id that tells visitors apart and gives nothing back."""
    return hashlib.sha256(b"now\n" + visitor.encode("ascii")).hexdigest()[:TOKEN_HEX]


def note(dynamodb: DynamoDB, settings: Settings, site: str, visitor: str, time_ms: int, now_ms: int) -> bool:
    """Note the visitor in its page view's minute, unless that minute is already past every read
    (a late resend): True if written."""
    minute = time_ms // times.MINUTE_MS
    if minute <= now_ms // times.MINUTE_MS - VISITOR_MINUTES:
        return False
    item = {
        "pk": {"S": names.realtime_pk(site)},
        "sk": {"S": names.realtime_sort_key(minute, _token(visitor))},
        "expires_at": {"N": str((minute + 1) * times.MINUTE_MS // 1000 + KEEP_SECONDS)},
    }
    with translated("could not note the visitor"):
        dynamodb.put_item(TableName=settings.counts_table, Item=item)
    return True


def realtime(dynamodb: DynamoDB, settings: Settings, site: str, now_ms: int) -> dict[str, Any]:
    """`{"site", "visitors", "visitors_exact", "visitors_start", "pageviews": [{"start", "pageviews"}], ...}`."""
    site = names.site_name(site)
    last = now_ms // times.MINUTE_MS
    first = last - VISITOR_MINUTES + 1
    request = dynamo.query_request(
        settings.counts_table,
        names.realtime_pk(site),
        sk="sk BETWEEN :low AND :high",
        values={":low": names.realtime_sort_key(first, ""), ":high": names.realtime_sort_key(last, "~")},
        projection="sk",
        consistent=True,  # every visitor whose beacon was answered before this read
    )
    items = dynamo.query_items(dynamodb, request, "could not read the visitors", most=MAX_VISITOR_ITEMS + 1)
    exact = len(items) <= MAX_VISITOR_ITEMS
    visitors = {attributes.sort_key(item).rsplit("#", 1)[1] for item in items[:MAX_VISITOR_ITEMS]}
    series = reads.histogram(
        dynamodb, settings, names.pageview_counter(site), last - PAGEVIEW_MINUTES + 1, last, "minute", now_ms
    )
    return {
        "site": site,
        "time": times.iso(now_ms),
        "visitors": len(visitors),
        "visitors_exact": exact,
        "visitors_start": times.iso(first * times.MINUTE_MS),
        "pageviews": [{"start": b["start"], "pageviews": b["count"]} for b in series["buckets"]],
        "pageviews_start": series["start"],
        "visitor_items_read": len(items),
    }
