"""`GET /sites/{site}/realtime`: the visitors of the last minutes (the union of the minute
sketches of the site's visitors, uniques.api.recent) and page views per minute (the minute series
of its page-view counter). How fresh each is and what it costs: docs/tracker.md, "Right now"."""

from __future__ import annotations

from typing import Any

from chalicelib.core import times
from chalicelib.core.aws import DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.counters import reads
from chalicelib.sites import names
from chalicelib.uniques import api as uniques_api

VISITOR_MINUTES = 5
PAGEVIEW_MINUTES = 30


def realtime(dynamodb: DynamoDB, settings: Settings, site: str, now_ms: int) -> dict[str, Any]:
    """`{"site", "visitors", "visitors_exact", "visitors_start", "pageviews": [{"start", "pageviews"}], ...}`."""
    site = names.site_name(site)
    last = now_ms // times.MINUTE_MS
    first = last - VISITOR_MINUTES + 1
    visitors = uniques_api.recent(dynamodb, settings, names.visitors_name(site), first, last)
    series = reads.histogram(
        dynamodb, settings, names.pageview_counter(site), last - PAGEVIEW_MINUTES + 1, last, "minute", now_ms
    )
    return {
        "site": site,
        "time": times.iso(now_ms),
        "visitors": visitors["cardinality"],
        "visitors_exact": visitors["exact"],
        "visitors_start": times.iso(first * times.MINUTE_MS),
        "pageviews": [{"start": b["start"], "pageviews": b["count"]} for b in series["buckets"]],
        "pageviews_start": series["start"],
    }
