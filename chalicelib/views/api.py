"""Exact view counters, the routes side: queue views, answer counts of all time or of a range,
and the top URLs of a window (`GET /views/top`: what it reads, docs/design.md, "Top URLs")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chalicelib.core import attributes, clock, dynamo, keyspace, pager, queues, timebuckets, times, window_params
from chalicelib.core.aws import SQS, DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.views import catalog as view_catalog
from chalicelib.views import layout as view_layout
from chalicelib.views import messages as view_messages
from chalicelib.views import rollup, top, top_store, windows
from chalicelib.views import validation as view_input
from chalicelib.views.validation import View

MAX_KEYS = windows.MAX_PARTS + 1  # a range's bucket items and the URL's counter
RETAINED_MESSAGE = "the range starts before what is kept: the answer counts retained_from to end"


def enqueue(sqs: SQS, settings: Settings, views: list[View], now_ms: int) -> None:
    """Queue views for counting; a view older than the horizon or too far in the future is
    refused (ValidationError naming it), and then none of the request's views is queued."""
    many = len(views) > 1
    for i, view in enumerate(views):
        where = f"views[{i}]" if many else "view"
        view_input.check_time(view, now_ms, settings.view_horizon_seconds, settings.max_future_skew_seconds, where)
    # A retried request cannot count twice (markers), so a partly sent batch is simply retried.
    url = queues.queue_url(sqs, settings.views_queue)
    entries = [{"Id": str(i), "MessageBody": view_messages.to_message(v)} for i, v in enumerate(views)]
    queues.send(sqs, url, entries)


def parse_url(params: Mapping[str, str]) -> str:
    return view_input.text(params.get("url"), "url", view_input.URL_MAX_CHARS)


def count(
    dynamodb: DynamoDB, settings: Settings, url: str, minutes: tuple[int, int] | None, now_ms: int
) -> dict[str, Any]:
    """`url`'s views: of all time (its counter) when `minutes` is None, else in that range of
    minutes (window_params.optional_minute_range: the buckets from floor(start) to floor(end))."""
    if minutes is None:
        failure = "could not read the view counter"
        item = dynamo.get_item(dynamodb, settings.counts_table, view_layout.counter_key(url), failure, consistent=False)
        return {"url": url, "views": attributes.integer(item, "views") if item else 0}
    return count_range(dynamodb, settings, url, minutes[0], minutes[1], now_ms)


def count_range(
    dynamodb: DynamoDB,
    settings: Settings,
    url: str,
    first_minute: int,
    last_minute: int,
    now_ms: int,
) -> dict[str, Any]:
    """The views in minutes first..last from the URL's bucket items and its counter's pending
    minutes (chalicelib.views.rollup): one BatchGetItem of at most MAX_KEYS keys, whatever the
    number of views."""
    window_params.check_minutes(first_minute, last_minute)
    parts = windows.plan(first_minute, last_minute)
    pk = view_layout.url_pk(url)
    stored = rollup.read(dynamodb, settings, {pk: [part.span for part in parts]})[pk]
    items = [stored.buckets[part.span] for part in parts]
    now_s = now_ms // 1000
    retention = settings.view_bucket_retention_seconds
    flags = [
        timebuckets.kept(part.span, dynamo.stored_expiry(item), retention, now_s) for part, item in zip(parts, items)
    ]
    first = timebuckets.kept_from(flags)
    total = sum(_part_count(part, item) for part, item in zip(parts[first:], items[first:]) if item is not None)
    if first < len(parts):
        total += rollup.pending_between(settings, stored.counter, parts[first].start_minute, last_minute, now_ms)
    end_ms = (last_minute + 1) * windows.MINUTE_MS
    retained_from = parts[first].start_minute * windows.MINUTE_MS if first < len(parts) else end_ms
    return {
        "url": url,
        "views": total,
        "start": times.iso(first_minute * windows.MINUTE_MS),
        "end": times.iso(end_ms),
        "keys_read": len(parts) + 1,
        **timebuckets.completeness(first == 0, retained_from, RETAINED_MESSAGE),
    }


@dataclass(frozen=True)
class UrlCounts:
    views: dict[str, int]
    keys_read: int


def count_urls(
    dynamodb: DynamoDB,
    settings: Settings,
    urls: list[str],
    first_minute: int,
    last_minute: int,
    now_ms: int,
) -> UrlCounts:
    """Each URL's views in minutes first..last, from its bucket items and pending minutes (as
    count_range, for many URLs in BatchGetItem calls of 100 keys; the range is taken as kept)."""
    parts = windows.plan(first_minute, last_minute)
    pks = {url: view_layout.url_pk(url) for url in urls}
    stored = rollup.read(dynamodb, settings, {pk: [part.span for part in parts] for pk in pks.values()})
    views: dict[str, int] = {}
    for url, pk in pks.items():
        found = stored[pk]
        total = rollup.pending_between(settings, found.counter, first_minute, last_minute, now_ms)
        for part in parts:
            item = found.buckets[part.span]
            total += 0 if item is None else _part_count(part, item)
        views[url] = total
    return UrlCounts(views, len(urls) * (len(parts) + 1))


def _part_count(part: windows.Part, item: dict[str, Any]) -> int:
    if part.inner is None:
        return rollup.total(part.span.level, item)
    first, last = part.inner
    names = (windows.inner_attribute(part.span.level, i) for i in range(first, last + 1))
    return sum(attributes.integer(item, name, 0) for name in names)


# -- GET /views/top ------------------------------------------------------------------------------


def parse_top_query(params: Mapping[str, str]) -> tuple[int, str | None]:
    """`limit` (1-1000, default 10) and the optional URL `prefix` of GET /views/top."""
    limit = pager.page_limit(params.get("limit"), top.DEFAULT_LIMIT, top.MAX_LIMIT)
    prefix = params.get("prefix")
    return limit, None if prefix is None else view_input.text(prefix, "prefix", view_input.URL_MAX_CHARS)


def top_urls(
    dynamodb: DynamoDB,
    settings: Settings,
    hours: tuple[int, int],
    limit: int,
    prefix: str | None,
    now_ms: int,
) -> dict[str, Any]:
    """The `limit` most viewed URLs (starting with `prefix`, if given) in hours first..last,
    with their exact views."""
    first_hour, last_hour = hours
    window_params.check_hours(first_hour, last_hour)
    spans = top.cover(first_hour, last_hour)
    found = top_store.read(dynamodb, settings, spans, now_ms)
    end_ms = (last_hour + 1) * times.HOUR_MS
    first = found.first
    start_minute = spans[first].start_minute if first < len(spans) else end_ms // windows.MINUTE_MS
    reads = [found.keys_read]

    def resolve(digests: Sequence[bytes]) -> dict[bytes, list[tuple[str, int]]]:
        urls = _urls_of(dynamodb, settings, digests, reads)
        wanted = [url for found in urls.values() for url in found if prefix is None or url.startswith(prefix)]
        views = count_urls(dynamodb, settings, wanted, start_minute, end_ms // windows.MINUTE_MS - 1, now_ms)
        reads[0] += views.keys_read
        return {d: [(url, views.views[url]) for url in found if url in views.views] for d, found in urls.items()}

    selection = top.select(found.merged, limit, resolve, limit + top.EXTRA_EXAMINED, filtered=prefix is not None)
    answer: dict[str, Any] = {
        "start": times.iso(first_hour * times.HOUR_MS),
        "end": times.iso(end_ms),
        "exact": selection.exact,
        "bound": selection.bound,
        "urls": [{"url": url, "views": views} for url, views in selection.urls],
        "others": {
            "urls": selection.others[0],
            "views": selection.others[1],
            "complete": selection.others_complete,
        },
        "keys_read": reads[0],
        "complete": first == 0,
    }
    if prefix is not None:
        answer["prefix"] = prefix
    if first:
        answer["retained_from"] = times.iso(start_minute * windows.MINUTE_MS)
        answer["message"] = "the window starts before what is kept: the answer counts retained_from to end"
    return answer


def _urls_of(
    dynamodb: DynamoDB, settings: Settings, digests: Sequence[bytes], reads: list[int]
) -> dict[bytes, list[str]]:
    """The URLs with these digests: the views catalog names each URL's sha256
    (view_catalog.shas_of), its counter item holds the text."""
    by_prefix, read = view_catalog.shas_of(dynamodb, settings, [d.hex() for d in digests], clock.now_ms())
    shas = {digest: by_prefix[digest.hex()] for digest in digests}
    reads[0] += read
    keys = [view_layout.counter_key_of(keyspace.VIEW_URL + sha) for found in shas.values() for sha in found]
    reads[0] += len(keys)
    texts = {
        attributes.partition_key(item).removeprefix(keyspace.VIEW_URL): attributes.text(item, "url")
        for item in dynamo.batch_get_items(dynamodb, settings.counts_table, keys, "could not read the view counters")
        if "url" in item
    }
    return {digest: [texts[sha] for sha in found if sha in texts] for digest, found in shas.items()}
