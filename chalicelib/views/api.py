"""Exact view counters, the routes side: queue views, answer counts of all time, of a range or
per local or UTC bucket (docs/design.md, "Local time" under Exact view counters), and the top
URLs of a window (`GET /views/top`: what it reads, docs/design.md, "Top URLs")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo

from chalicelib.core import attributes, dynamo, keyspace, pager, queues, timebuckets, times, window_params, zones
from chalicelib.core.aws import SQS, DynamoDB
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.views import catalog as view_catalog
from chalicelib.views import layout as view_layout
from chalicelib.views import messages as view_messages
from chalicelib.views import rollup, top, top_store, windows
from chalicelib.views import validation as view_input
from chalicelib.views.validation import View

MAX_KEYS = windows.MAX_PARTS + 1  # a range's bucket items and the URL's counter
RETAINED_MESSAGE = "the range starts before what is kept: the answer counts retained_from to end"
SERIES_RESOLUTIONS: tuple[zones.LocalResolution, ...] = ("hour", "day", "week", "month")


def enqueue(sqs: SQS, settings: Settings, views: list[View], now_ms: int) -> None:
    """Queue views for counting; a view older than the horizon or too far in the future is
    refused (ValidationError naming it), and then none of the request's views is queued."""
    for i, view in enumerate(views):
        where = f"views[{i}]" if len(views) > 1 else "view"
        view_input.check_time(view, now_ms, settings.view_horizon_seconds, settings.max_future_skew_seconds, where)
    # A retried request cannot count twice (markers), so a partly sent batch is simply retried.
    url = queues.queue_url(sqs, settings.views_queue)
    entries = [{"Id": str(i), "MessageBody": view_messages.to_message(v)} for i, v in enumerate(views)]
    queues.send(sqs, url, entries)


def count(
    dynamodb: DynamoDB, settings: Settings, url: str, minutes: tuple[int, int] | None, now_ms: int
) -> dict[str, Any]:
    """`url`'s views: of all time when `minutes` is None, else in those minutes (window_params.minute_range)."""
    if minutes is None:
        failure = "could not read the view counter"
        item = dynamo.get_item(dynamodb, settings.counts_table, view_layout.counter_key(url), failure, consistent=False)
        return {"url": url, "views": attributes.integer(item, "views") if item else 0}
    return count_range(dynamodb, settings, url, minutes[0], minutes[1], now_ms)


def windowed_count(dynamodb: DynamoDB, settings: Settings, params: Mapping[str, str], now_ms: int) -> dict[str, Any]:
    """GET /views: of all time without a window; else over the window (in `tz`), with `buckets`
    per local or UTC hour, day, week or month for `resolution`, and `previous` for `compare`."""
    url = view_input.text(params.get("url"), "url", view_input.URL_MAX_CHARS)
    if not window_params.is_windowed(params):
        if "compare" in params or "resolution" in params:
            raise ValidationError("compare and resolution need a window")
        return count(dynamodb, settings, url, None, now_ms)
    window = window_params.window(params, now_ms)
    resolution = window_params.local_resolution(params, SERIES_RESOLUTIONS) if "resolution" in params else None

    def read(first: int, last: int) -> dict[str, Any]:
        if resolution is None:
            return count_range(dynamodb, settings, url, first, last, now_ms, window.label)
        return count_series(dynamodb, settings, url, window.zone, first, last, resolution, now_ms, window.label)

    return window_params.compared(window, read, zoned=True)


def count_range(
    dynamodb: DynamoDB,
    settings: Settings,
    url: str,
    first_minute: int,
    last_minute: int,
    now_ms: int,
    label: times.Label = times.utc_label,
) -> dict[str, Any]:
    """The views in minutes first..last: one BatchGetItem (docs/design.md, "Ranged reads")."""
    window_params.check_minutes(first_minute, last_minute)
    views, read = _series(dynamodb, settings, url, [(first_minute, last_minute)], now_ms)
    return {"url": url, "views": views[0], "start": label(first_minute), "end": label(last_minute + 1), **read}


def count_series(
    dynamodb: DynamoDB,
    settings: Settings,
    url: str,
    zone: ZoneInfo,
    first_minute: int,
    last_minute: int,
    resolution: zones.LocalResolution,
    now_ms: int,
    label: times.Label = times.utc_label,
) -> dict[str, Any]:
    """The views per whole bucket of `resolution` in `zone` over minutes first..last, and in all,
    in one BatchGetItem (docs/design.md, "Local time")."""
    window_params.check_minutes(first_minute, last_minute)
    window_params.check_histogram(zones.nominal_count(first_minute, last_minute, resolution))
    local = zones.buckets(zone, first_minute, last_minute, resolution)
    window_params.check_histogram(len(local))
    views, read = _series(dynamodb, settings, url, [(b.first_minute, b.last_minute) for b in local], now_ms)
    return {
        "url": url,
        "resolution": resolution,
        "views": sum(views),
        "start": label(local[0].first_minute),
        "end": label(local[-1].last_minute + 1),
        "buckets": [{"start": label(b.first_minute), "views": n} for b, n in zip(local, views)],
        **read,
    }


def _series(
    dynamodb: DynamoDB, settings: Settings, url: str, ranges: list[tuple[int, int]], now_ms: int
) -> tuple[list[int], dict[str, Any]]:
    """The views in each range of minutes (inclusive, in time order) from one read of the items their
    plans name, and the answer's `keys_read` and completeness (docs/design.md, "Retention")."""
    plans = [windows.plan(first, last) for first, last in ranges]
    spans = sorted({part.span for plan in plans for part in plan})
    pk = view_layout.url_pk(url)
    stored = rollup.read(dynamodb, settings, {pk: spans})[pk]
    parts = [(i, part) for i, plan in enumerate(plans) for part in plan]
    kept = [rollup.kept(settings, part.span, stored.buckets[part.span], now_ms) for _, part in parts]
    first_part = timebuckets.kept_from(kept)
    views = [0] * len(ranges)
    for i, part in parts[first_part:]:
        views[i] += _part_count(part, stored.buckets[part.span])
    retained_from = parts[first_part][1].start_minute if first_part < len(parts) else ranges[-1][1] + 1
    for i, (first, last) in enumerate(ranges):
        views[i] += rollup.pending_between(settings, stored.counter, max(first, retained_from), last, now_ms)
    return views, {
        "keys_read": len(spans) + 1,
        **timebuckets.completeness(first_part == 0, retained_from * windows.MINUTE_MS, RETAINED_MESSAGE),
    }


def count_urls(
    dynamodb: DynamoDB, settings: Settings, urls: list[str], first_minute: int, last_minute: int, now_ms: int
) -> tuple[dict[str, int], int]:
    """Each URL's views in minutes first..last, as count_range reads them (the range taken as kept),
    and the keys read."""
    parts = windows.plan(first_minute, last_minute)
    pks = {url: view_layout.url_pk(url) for url in urls}
    stored = rollup.read(dynamodb, settings, {pk: [part.span for part in parts] for pk in pks.values()})
    views = {
        url: rollup.pending_between(settings, stored[pk].counter, first_minute, last_minute, now_ms)
        + sum(_part_count(part, stored[pk].buckets[part.span]) for part in parts)
        for url, pk in pks.items()
    }
    return views, len(urls) * (len(parts) + 1)


def _part_count(part: windows.Part, item: dict[str, Any] | None) -> int:
    if part.inner is None:
        return rollup.total(item)
    first, last = part.inner
    names = (windows.inner_attribute(part.span.resolution, i) for i in range(first, last + 1))
    return sum(attributes.integer(item or {}, name, 0) for name in names)


# -- GET /views/top ------------------------------------------------------------------------------


def windowed_top(dynamodb: DynamoDB, settings: Settings, params: Mapping[str, str], now_ms: int) -> dict[str, Any]:
    """GET /views/top over the window (in `tz`), with `previous` for `compare`: the window's hours
    (window_params.aligned_hours), or a calendar window's own minutes."""
    limit = pager.page_limit(params.get("limit"), top.DEFAULT_LIMIT, top.MAX_LIMIT)
    prefix = view_input.text(params["prefix"], "prefix", view_input.URL_MAX_CHARS) if "prefix" in params else None
    window = window_params.window(params, now_ms)
    calendar = params.get("window") in zones.CALENDAR_WINDOWS

    def read(first: int, last: int) -> dict[str, Any]:
        hours = window_params.aligned_hours(params, first, last)
        exact = (first, last) if calendar else None
        return top_urls(dynamodb, settings, hours, limit, prefix, now_ms, exact, window.label)

    return window_params.compared(window, read, zoned=True)


def top_urls(
    dynamodb: DynamoDB,
    settings: Settings,
    hours: tuple[int, int],
    limit: int,
    prefix: str | None,
    now_ms: int,
    minutes: tuple[int, int] | None = None,
    label: times.Label = times.utc_label,
) -> dict[str, Any]:
    """The `limit` most viewed URLs (starting with `prefix`, if given) in hours first..last with their
    exact views, or over `minutes` inside those hours (docs/design.md, "Top URLs")."""
    first_hour, last_hour = hours
    window_params.check_hours(first_hour, last_hour)
    spans = top.cover(first_hour, last_hour)
    first, merged, keys_read = top_store.read(dynamodb, settings, spans, now_ms)
    first_minute, last_minute = minutes or (first_hour * 60, (last_hour + 1) * 60 - 1)
    start_minute = max(first_minute, spans[first].first_minute) if first < len(spans) else last_minute + 1
    reads = [keys_read]

    def resolve(digests: Sequence[bytes]) -> dict[bytes, list[tuple[str, int]]]:
        urls = _urls_of(dynamodb, settings, digests, reads, now_ms)
        wanted = [url for found in urls.values() for url in found if prefix is None or url.startswith(prefix)]
        views, read = count_urls(dynamodb, settings, wanted, start_minute, last_minute, now_ms)
        reads[0] += read
        return {d: [(url, views[url]) for url in found if url in views] for d, found in urls.items()}

    # Hours wider than the minutes: what the examined URLs leave out is known only by its hours.
    filtered = prefix is not None or minutes is not None
    selection = top.select(merged, limit, resolve, limit + top.EXTRA_EXAMINED, filtered=filtered)
    answer: dict[str, Any] = {
        "start": label(first_minute),
        "end": label(last_minute + 1),
        "exact": selection.exact,
        "bound": selection.bound,
        "urls": [{"url": url, "views": views} for url, views in selection.urls],
        "others": {"urls": selection.others[0], "views": selection.others[1], "complete": selection.others_complete},
        "keys_read": reads[0],
        "complete": first == 0,
    }
    if prefix is not None:
        answer["prefix"] = prefix
    if first:
        answer["retained_from"] = label(start_minute)
        answer["message"] = "the window starts before what is kept: the answer counts retained_from to end"
    return answer


def _urls_of(
    dynamodb: DynamoDB, settings: Settings, digests: Sequence[bytes], reads: list[int], now_ms: int
) -> dict[bytes, list[str]]:
    """The URLs with these digests: their sha256 from the views catalog, their text from their counters."""
    by_prefix, read = view_catalog.shas_of(dynamodb, settings, [d.hex() for d in digests], now_ms)
    shas = {digest: by_prefix[digest.hex()] for digest in digests}
    keys = [view_layout.counter_key_of(keyspace.VIEW_URL + sha) for found in shas.values() for sha in found]
    reads[0] += read + len(keys)
    texts = {
        attributes.partition_key(item).removeprefix(keyspace.VIEW_URL): attributes.text(item, "url")
        for item in dynamo.batch_get_items(dynamodb, settings.counts_table, keys, "could not read the view counters")
        if "url" in item
    }
    return {digest: [texts[sha] for sha in found if sha in texts] for digest, found in shas.items()}
