"""Which URLs have view counters: `GET /views/urls` and the queue handler's log of the URLs whose
counter is not `listed` yet, in core.catalog by sha256 (docs/design.md, "Which names exist")."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from chalicelib.core import attributes, catalog, dynamo, keyspace, pager, times
from chalicelib.core.aws import DynamoDB
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.views import layout as view_layout

KIND = "views"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_recent = catalog.Recent()
LISTED = "listed"  # on a counter item: its URL has a catalog entry
LAST_COUNTED = "last"  # on a counter item: epoch ms of its latest count


def record(
    dynamodb: DynamoDB,
    settings: Settings,
    url_pks: Iterable[str],
    now_ms: int,
    sleep: Sleep | None,
    known: Mapping[str, dict[str, Any] | None],
) -> int:
    """Log the URLs (by counter partition) about to be counted that are not listed yet (`known`:
    counters the caller read, not read again); returns the writes made."""
    hour = now_ms // times.HOUR_MS
    fresh = _recent.fresh(dynamodb, dict.fromkeys(pk.removeprefix(keyspace.VIEW_URL) for pk in url_pks), hour)
    if not fresh:
        return 0
    keys = [view_layout.counter_key_of(pk) for pk in (keyspace.VIEW_URL + sha for sha in fresh) if pk not in known]
    failure = "could not read the view counters"
    read = dynamo.batch_get_items(dynamodb, settings.counts_table, keys, failure, sleep, projection="pk, listed")
    counters = [*read, *(item for item in known.values() if item is not None)]
    listed = {attributes.partition_key(item).removeprefix(keyspace.VIEW_URL) for item in counters if LISTED in item}
    new = {sha: None for sha in fresh if sha not in listed}
    writes = catalog.log(dynamodb, settings, KIND, new, now_ms) if new else 0
    _recent.mark(dynamodb, dict.fromkeys(fresh), hour)
    return writes


def shas_of(
    dynamodb: DynamoDB, settings: Settings, prefixes: list[str], now_ms: int
) -> tuple[dict[str, list[str]], int]:
    """The sha256 (hex) of every listed URL beginning with each hex prefix (a top-URL digest),
    and the catalog items read to find them."""
    return catalog.names_with_prefix(dynamodb, settings, KIND, prefixes, now_ms)


def _sha(value: str) -> str:
    if not _SHA256.fullmatch(value):
        raise ValidationError("not a URL digest")
    return value


def listing(dynamodb: DynamoDB, settings: Settings, params: dict[str, str], now_ms: int) -> dict[str, Any]:
    """One page of `GET /views/urls` (docs/api.md), in the catalog's order (by digest: stable, not by count)."""
    request = pager.page_request(params, _sha)
    entries, cursor = catalog.page(dynamodb, settings, KIND, request, now_ms)
    keys = [view_layout.counter_key_of(keyspace.VIEW_URL + e.name) for e in entries]
    items = dynamo.batch_get_items(dynamodb, settings.counts_table, keys, "could not read the view counters")
    counters = {attributes.partition_key(item).removeprefix(keyspace.VIEW_URL): item for item in items if "url" in item}
    urls = [
        {
            "url": attributes.text(item, "url"),
            "views": attributes.integer(item, "views", 0),
            "last_counted": times.iso(attributes.optional_integer(item, LAST_COUNTED) or entry.last_seen_ms),
        }
        for entry in entries
        # Listed before its first view was counted: no counter yet, skipped.
        if (item := counters.get(entry.name)) is not None
    ]
    return {"urls": urls, "next": cursor}
