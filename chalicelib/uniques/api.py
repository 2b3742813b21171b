"""Unique counts, the routes side: validate and queue items; answer the cardinality of one name
or a union, all-time or over an hour-aligned window; per-bucket series; the names that exist."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.core import (
    attributes,
    catalog,
    dynamo,
    keyspace,
    pager,
    queues,
    timebuckets,
    times,
    validation,
    window_params,
)
from chalicelib.core.aws import SQS, DynamoDB
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import translated
from chalicelib.core.timebuckets import Bucket
from chalicelib.uniques import layout, sketches
from chalicelib.uniques.batches import MAX_ITEMS, decode_item, message_body, retention_s

MAX_ITEM_CHARS = 1024
MAX_UNION_NAMES = 50
MAX_KEYS_READ = 1000  # one name's 30-day window is at most 76; a union multiplies it
BODY_FIELDS = {"data", "time"}
ALIGNMENT_NOTE = "unique counts are counted over whole UTC hours: start and end are hour boundaries"


@dataclass(frozen=True)
class Post:
    items: list[str]
    time_ms: int


def parse_body(body: Any, now_ms: int, settings: Settings) -> Post:
    """`{"data": item | [items], "time"?: epoch ms | ISO-8601}` (time defaults to now, and may
    lie at most MAX_FUTURE_SKEW_SECONDS ahead, as an event's)."""
    if not isinstance(body, dict) or "data" not in body or not set(body) <= BODY_FIELDS:
        raise ValidationError('the body must be {"data": item} or {"data": [items]}, with an optional "time"')
    data = body["data"]
    items = [data] if isinstance(data, str) else data
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_ITEMS:
        raise ValidationError(f"data must be a string or a list of 1-{MAX_ITEMS} strings")
    for index, item in enumerate(items):
        if not isinstance(item, str) or not 1 <= len(item) <= MAX_ITEM_CHARS:
            raise ValidationError(f"data[{index}] must be a string of 1-{MAX_ITEM_CHARS} characters")
        try:
            item.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError(f"data[{index}] is not valid text (a lone UTF-16 surrogate?)") from exc
    time_ms = now_ms if body.get("time") is None else times.parse(body["time"], "time")
    return Post(items, times.not_ahead(time_ms, now_ms, settings.max_future_skew_seconds))


def enqueue(sqs: SQS, settings: Settings, key: bytes, name: str, post: Post) -> int:
    """Queue the items as their hashes under the stage's item key (`key`, never stored)."""
    body = message_body(name, sketches.item_hashes(key, post.items), post.time_ms)
    with translated("could not queue the items"):
        sqs.send_message(QueueUrl=queues.queue_url(sqs, settings.uniques_queue), MessageBody=body)
    return len(post.items)


def parse_names(raw: str | None) -> list[str]:
    """`names=a,b,c` as distinct validated names, in the order given."""
    if not raw:
        raise ValidationError("names must list 1 or more sketch names, comma separated")
    names = list(dict.fromkeys(part.strip() for part in raw.split(",")))
    if len(names) > MAX_UNION_NAMES:
        raise ValidationError(f"names may list at most {MAX_UNION_NAMES} sketches")
    return [validation.name(n, "names") for n in names]


# -- counts ----------------------------------------------------------------------------------


def count(
    dynamodb: DynamoDB, settings: Settings, names: list[str], hours: tuple[int, int] | None, now_ms: int
) -> dict[str, Any]:
    """The unique count of one name or the union of several: of all time without a window
    (`hours` None), else over those hours (window_params.optional_hour_range)."""
    if hours is None:
        return cardinality(dynamodb, settings, names)
    return window_cardinality(dynamodb, settings, names, hours, now_ms)


def cardinality(dynamodb: DynamoDB, settings: Settings, names: list[str]) -> dict[str, Any]:
    """All time: the union of every shard of the named sketches, one Query per name."""
    stored = [shard for name in names for shard in _read_all_shards(dynamodb, settings, name)]
    merged = sketches.merge(stored, sketches.precision_for(settings.uniques_error_rate))
    return {**_estimate(merged), "start": None, "end": None, "keys_read": len(stored), "complete": True}


def window_cardinality(
    dynamodb: DynamoDB,
    settings: Settings,
    names: list[str],
    hours: tuple[int, int],
    now_ms: int,
) -> dict[str, Any]:
    """The union of the names' day and hour sketches covering the hours, in one BatchGetItem
    (of at most 100 keys: one name's window of up to 96 days)."""
    first, last = hours
    window_params.check_hours(first, last)
    first_live_hour = timebuckets.first_live_index("hour", now_ms, retention_s(settings, "hour"))
    first_live_day = timebuckets.first_live_index("day", now_ms, retention_s(settings, "day"))
    plan = timebuckets.hour_day_plan(first, last, first_live_hour)
    wanted = [layout.bucket_key(name, bucket) for name in names for bucket in plan]
    if len(wanted) > MAX_KEYS_READ:
        raise ValidationError(f"this would read {len(wanted)} sketches (at most {MAX_KEYS_READ}): fewer names or days")
    projection = "pk, sk, sketch, expires_at"
    found = dynamo.batch_get_items(
        dynamodb, settings.counts_table, wanted, "could not read the sketches", projection=projection
    )
    now_s = now_ms // 1000
    live = [decode_item(item) for item in found if _unexpired(item, now_s)]
    merged = sketches.merge(live, sketches.precision_for(settings.uniques_error_rate))
    answer = {
        **_estimate(merged),
        "start": times.iso(plan[0].start_ms),
        "end": times.iso(plan[-1].end_ms),
        "aligned": ALIGNMENT_NOTE,
        "keys_read": len(wanted),
        **_completeness(plan[0], first_live_day),
    }
    asked_from = timebuckets.Bucket("hour", first).start_ms
    if plan[0].start_ms < asked_from and answer["complete"]:
        answer["message"] = (
            f"counted from {answer['start']}, not {times.iso(asked_from)}: hour sketches are kept "
            f"{settings.uniques_hour_retention_seconds // 3600} h, so an older partial day is counted whole"
        )
    return answer


def _unexpired(item: dict[str, Any], now_s: int) -> bool:
    """A window sketch read before DynamoDB's TTL deleted it still counts only until its expiry
    (one without an expiry is not a window sketch: it does not count)."""
    return (dynamo.stored_expiry(item) or 0) > now_s


def _completeness(oldest: Bucket, first_live_day: int) -> dict[str, Any]:
    day = oldest.first_minute // timebuckets.RESOLUTION_MINUTES["day"]
    return timebuckets.completeness(
        day >= first_live_day,
        Bucket("day", first_live_day).start_ms,
        "the window starts before day sketches are kept: older items are no longer counted",
    )


def _estimate(sketch: sketches.Sketch) -> dict[str, Any]:
    low, high = sketches.interval(sketch)
    exact = sketches.is_exact(sketch)
    return {
        "cardinality": sketches.estimate(sketch),
        "lower": low,
        "upper": high,
        "error_rate": 0.0 if exact else round(sketches.standard_error(sketch.p), 6),
        "exact": exact,
    }


def histogram(
    dynamodb: DynamoDB,
    settings: Settings,
    name: str,
    hours: tuple[int, int],
    resolution: str,
    now_ms: int,
) -> dict[str, Any]:
    """Distinct items per hour or day bucket (not additive: an item seen in two buckets is
    counted in each). One paginated Query over the name's sketches of that resolution."""
    size = timebuckets.RESOLUTION_MINUTES[resolution] // timebuckets.HOUR_MINUTES
    first, last = hours[0] // size, hours[1] // size
    window_params.check_histogram(last - first + 1)
    items = dynamo.query_sort_range(
        dynamodb,
        settings.counts_table,
        layout.window_pk(name),
        layout.bucket_sort_key(resolution, first),
        layout.bucket_sort_key(resolution, last),
        "could not read the sketches",
    )
    now_s = now_ms // 1000
    counts: dict[int, dict[str, Any]] = {}
    for item in items:
        if _unexpired(item, now_s):
            sketch = decode_item(item)
            counts[keyspace.sort_key_index(attributes.sort_key(item))] = {
                "cardinality": sketches.estimate(sketch),
                "exact": sketches.is_exact(sketch),
            }
    retention = retention_s(settings, resolution)
    first_live = timebuckets.first_live_index(resolution, now_ms, retention)  # type: ignore[arg-type]
    buckets = [Bucket(resolution, i) for i in range(first, last + 1)]  # type: ignore[arg-type]
    return {
        "name": name,
        "resolution": resolution,
        "aligned": ALIGNMENT_NOTE,
        "additive": False,
        **timebuckets.series(buckets, lambda b: counts.get(b.index, {"cardinality": 0, "exact": True})),
        **timebuckets.completeness(first >= first_live, Bucket(resolution, first_live).start_ms, None),  # type: ignore[arg-type]
    }


def _read_all_shards(dynamodb: DynamoDB, settings: Settings, name: str) -> list[sketches.Sketch]:
    request = dynamo.query_request(settings.counts_table, layout.shards_pk(name), projection="pk, sk, sketch")
    return [decode_item(item) for item in dynamo.query_items(dynamodb, request, "could not read the sketches")]


# -- the names that exist ----------------------------------------------------------------------


def list_names(dynamodb: DynamoDB, settings: Settings, params: Mapping[str, str], now_ms: int) -> dict[str, Any]:
    """`{"names": [{"name", "last_seen"}], "next": cursor | None}` in name order, one page
    (core.pager) of `limit` (1-1000, default 100) after `cursor` (the `next` of the previous page),
    from the catalog of unique-count names (core.catalog). A window without names is refused:
    the listing has no window, and ignoring one would answer a question that was not asked."""
    if window_params.is_windowed(params):
        raise ValidationError(f"{', '.join(window_params.WINDOW_PARAMS)} count a union: give names too")
    request = pager.page_request(params, lambda n: validation.name(n, "cursor"))
    entries, cursor = catalog.touched_page(dynamodb, settings, layout.CATALOG_KIND, request, now_ms)
    return {"names": [{"name": e.name, "last_seen": times.iso(e.last_seen_ms)} for e in entries], "next": cursor}
