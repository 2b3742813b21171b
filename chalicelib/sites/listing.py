"""`GET /sites`: the sites that sent page views, from the catalog of sites (core.catalog),
in name order, one page (core.pager) at a time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.core import catalog, pager, times
from chalicelib.core.aws import DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.sites import names


def listing(dynamodb: DynamoDB, settings: Settings, params: Mapping[str, str], now_ms: int) -> dict[str, Any]:
    """`{"sites": [{"site", "last_seen"}], "next"}`; `limit` 1-1000 (default 100), `cursor`."""
    request = pager.page_request(params, lambda name: names.site_name(name, "cursor"))
    entries, cursor = catalog.touched_page(dynamodb, settings, names.CATALOG_KIND, request, now_ms)
    return {"sites": [{"site": e.name, "last_seen": times.iso(e.last_seen_ms)} for e in entries], "next": cursor}
