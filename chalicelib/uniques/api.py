"""Unique counts, the routes side: validate and queue items; answer the cardinality of one name or
a union, all-time or over a window; per-bucket series; the names that exist. What a window reads:
docs/counting.md, "Unique counts in a time zone"."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.core import catalog, dynamo, inputs, pager, queues, timebuckets, times, validation, window_params, zones
from chalicelib.core.aws import SQS, DynamoDB
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import translated
from chalicelib.uniques import layout, sketches, windows
from chalicelib.uniques.batches import MAX_ITEMS, decode_item, message_body, retention_s

MAX_ITEM_CHARS = 1024
MAX_UNION_NAMES = 50
MAX_KEYS_READ = 1000  # a union multiplies one name's keys (window_cardinality)
BODY_FIELDS = {"data", "time"}
ALIGNMENT_NOTE = (
    "unique counts are counted over whole buckets: start and end are hour boundaries, or the quarter "
    "hours where a local day starts"
)
PROJECTION = "pk, sk, sketch, expires_at"
READ_FAILED = "could not read the sketches"
# A series' buckets (quarter sketches only cut a local day or hour where it starts).
RESOLUTIONS: tuple[zones.LocalResolution, ...] = ("hour", "day", "week", "month")


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
        inputs.text(validation.text(item, f"data[{index}]", MAX_ITEM_CHARS), f"data[{index}]")
    time_ms = now_ms if body.get("time") is None else times.parse(body["time"], "time")
    return Post(items, times.not_ahead(time_ms, now_ms, settings.max_future_skew_seconds))


def enqueue(sqs: SQS, settings: Settings, key: bytes, name: str, post: Post, minute: bool = False) -> int:
    """Queue the items as their hashes under the stage's item key (`key`, never stored); `minute`:
    kept in minute sketches too, for `recent`."""
    body = message_body(name, sketches.item_hashes(key, post.items), post.time_ms, minute)
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


def windowed_count(
    dynamodb: DynamoDB, settings: Settings, names: list[str], params: Mapping[str, str], now_ms: int
) -> dict[str, Any]:
    """GET /hyperloglog[/{name}]: of all time without a window, else over the window (in `tz`),
    with `previous` for `compare`."""
    if not window_params.is_windowed(params):
        if "compare" in params:
            raise ValidationError("compare needs a window: all time has no period before it")
        return cardinality(dynamodb, settings, names)
    window = window_params.window(params, now_ms)
    return window_params.compared(
        window,
        lambda first, last: {
            **window_cardinality(dynamodb, settings, names, span(params, first, last), now_ms, window.label),
            **({"tz": window.zone.key} if window.local else {}),
        },
    )


def span(params: Mapping[str, str], first: int, last: int) -> tuple[int, int]:
    """The minutes [start, stop) a unique count reads for window minutes first..last: a calendar
    window's own (its local midnights lie on quarter hours), any other its UTC hours."""
    if params.get("window") in zones.CALENDAR_WINDOWS:
        return minute_span(first, last)
    return hour_span(window_params.aligned_hours(params, first, last))


def minute_span(first: int, last: int) -> tuple[int, int]:
    """Minutes first..last as [start, stop), read as the quarter hours holding them."""
    return first, last + 1


def hour_span(hours: tuple[int, int]) -> tuple[int, int]:
    """Hours first..last (window_params.hour_range) as the minutes [start, stop) they hold."""
    return hours[0] * timebuckets.HOUR_MINUTES, (hours[1] + 1) * timebuckets.HOUR_MINUTES


def recent(dynamodb: DynamoDB, settings: Settings, name: str, first: int, last: int) -> dict[str, Any]:
    """The unique count of minutes first..last from the name's minute sketches: one consistent BatchGetItem."""
    wanted = [layout.bucket_key(name, timebuckets.Bucket("minute", m)) for m in range(first, last + 1)]
    found = dynamo.batch_get_items(
        dynamodb, settings.counts_table, wanted, READ_FAILED, projection=PROJECTION, consistent=True
    )
    return {**_estimate(settings, [decode_item(item) for item in found]), "keys_read": len(wanted)}


def cardinality(dynamodb: DynamoDB, settings: Settings, names: list[str]) -> dict[str, Any]:
    """All time: the union of every shard of the named sketches, one Query per name."""
    table = settings.counts_table
    requests = [dynamo.query_request(table, layout.shards_pk(name), projection="pk, sk, sketch") for name in names]
    stored = [decode_item(item) for request in requests for item in dynamo.query_items(dynamodb, request, READ_FAILED)]
    return {**_estimate(settings, stored), "start": None, "end": None, "keys_read": len(stored), "complete": True}


def window_cardinality(
    dynamodb: DynamoDB,
    settings: Settings,
    names: list[str],
    span: tuple[int, int],
    now_ms: int,
    label: times.Label = times.utc_label,
) -> dict[str, Any]:
    """The union of the names' sketches covering minutes [start, stop), checked, then widened to quarter
    hours (windows.cover), read with BatchGetItem: docs/design.md, "Windows and exactness"."""
    window_params.check_minutes(span[0], span[1] - 1)
    start, stop = windows.widen(*span)
    plan = windows.cover(start, stop, _first_live(settings, "hour", now_ms))
    wanted = [layout.bucket_key(name, bucket) for name in names for bucket in plan]
    if len(wanted) > MAX_KEYS_READ:
        raise ValidationError(f"this would read {len(wanted)} sketches (at most {MAX_KEYS_READ}): fewer names or days")
    found = dynamo.batch_get_items(dynamodb, settings.counts_table, wanted, READ_FAILED, projection=PROJECTION)
    first_live_day = _first_live(settings, "day", now_ms)
    answer = {
        **_estimate(settings, [decode_item(item) for item in found if _unexpired(item, now_ms // 1000)]),
        "start": label(plan[0].first_minute),
        "end": label(plan[-1].stop_minute),
        "aligned": ALIGNMENT_NOTE,
        "keys_read": len(wanted),
        **timebuckets.completeness(
            plan[0].first_minute // timebuckets.DAY_MINUTES >= first_live_day,
            first_live_day * timebuckets.DAY_MINUTES * times.MINUTE_MS,
            "the window starts before day sketches are kept: older items are no longer counted",
        ),
    }
    if plan[0].first_minute < start and answer["complete"]:
        answer["message"] = (
            f"counted from {answer['start']}, not {label(start)}: hour sketches are kept "
            f"{settings.uniques_hour_retention_seconds // 3600} h, so an older partial day is counted whole"
        )
    return answer


def _first_live(settings: Settings, level: timebuckets.Resolution, now_ms: int) -> int:
    return timebuckets.first_live_index(level, now_ms, retention_s(settings, level))


def _unexpired(item: dict[str, Any], now_s: int) -> bool:
    """Counts until its expiry (docs/guarantees.md, "TTL deletes late"); no expiry: no window sketch."""
    return (dynamo.stored_expiry(item) or 0) > now_s


def _estimate(settings: Settings, parts: list[sketches.Sketch]) -> dict[str, Any]:
    sketch = sketches.merge(parts, sketches.precision_for(settings.uniques_error_rate))
    low, high = sketches.interval(sketch)
    exact = sketches.is_exact(sketch)
    return {
        "cardinality": sketches.estimate(sketch),
        "lower": low,
        "upper": high,
        "error_rate": 0.0 if exact else round(sketches.standard_error(sketch.p), 6),
        "exact": exact,
    }


def windowed_histogram(
    dynamodb: DynamoDB, settings: Settings, name: str, params: Mapping[str, str], now_ms: int
) -> dict[str, Any]:
    """GET /hyperloglog/{name}/histogram: per UTC or local bucket (hour, day, week or month) of the
    window, with `previous` for `compare`."""
    window = window_params.window(params, now_ms)
    resolution = window_params.local_resolution(params, RESOLUTIONS, "day")

    def read(first: int, last: int) -> dict[str, Any]:
        start, stop = span(params, first, last)
        window_params.check_histogram(zones.nominal_count(start, stop - 1, resolution))
        buckets = [(b.first_minute, b.last_minute + 1) for b in zones.buckets(window.zone, start, stop - 1, resolution)]
        return histogram(dynamodb, settings, name, buckets, resolution, now_ms, window.label)

    return window_params.compared(window, read, zoned=True)


def histogram(
    dynamodb: DynamoDB,
    settings: Settings,
    name: str,
    buckets: list[tuple[int, int]],
    resolution: str,
    now_ms: int,
    label: times.Label = times.utc_label,
) -> dict[str, Any]:
    """Distinct items per bucket, each bucket minutes [start, stop) (a UTC or local hour, day,
    week or month) read as the union of its cover (windows.cover): not additive."""
    window_params.check_histogram(len(buckets))
    first_live_hour = _first_live(settings, "hour", now_ms)
    first_live_day = _first_live(settings, "day", now_ms)
    spans = [windows.widen(*bucket) for bucket in buckets]
    covers = [windows.cover(start, stop, first_live_hour) for start, stop in spans]
    # A bucket is answered from the sketches kept inside it: not from a whole day read for it.
    flags = [
        cover[0].first_minute >= start
        and cover[-1].stop_minute <= stop
        and all(b.resolution != "day" or b.index >= first_live_day for b in cover)
        for (start, stop), cover in zip(spans, covers)
    ]
    first = timebuckets.kept_from(flags)
    wanted = {b for cover in covers[first:] for b in cover}
    stored, keys_read = _read_buckets(dynamodb, settings, name, wanted, now_ms)
    p = sketches.precision_for(settings.uniques_error_rate)
    values: list[dict[str, Any]] = [{"cardinality": 0, "exact": True}] * first
    for cover in covers[first:]:
        merged = sketches.merge([stored[b] for b in cover if b in stored], p)
        values.append({"cardinality": sketches.estimate(merged), "exact": sketches.is_exact(merged)})
    retained_from = buckets[first][0] if first < len(buckets) else buckets[-1][1]
    return {
        "name": name,
        "resolution": resolution,
        "aligned": ALIGNMENT_NOTE,
        "additive": False,
        "start": label(buckets[0][0]),
        "end": label(buckets[-1][1]),
        "buckets": [{"start": label(b[0]), **v} for b, v in zip(buckets, values)],
        "keys_read": keys_read,
        **timebuckets.completeness(first == 0, retained_from * times.MINUTE_MS, None),
    }


def _read_buckets(
    dynamodb: DynamoDB, settings: Settings, name: str, wanted: set[timebuckets.Bucket], now_ms: int
) -> tuple[dict[timebuckets.Bucket, sketches.Sketch], int]:
    """The unexpired sketches of `wanted` that exist, and how many keys were read."""
    table, keys_read = settings.counts_table, 0
    found: list[dict[str, Any]] = []
    for level in windows.LEVELS:
        indexes = sorted(b.index for b in wanted if b.resolution == level)
        if indexes and 2 * len(indexes) >= indexes[-1] - indexes[0] + 1:
            lo, hi = (layout.bucket_sort_key(level, i) for i in (indexes[0], indexes[-1]))
            read = dynamo.query_sort_range(dynamodb, table, layout.window_pk(name), lo, hi, READ_FAILED)
            keys_read += len(read)
        else:
            keys = [layout.bucket_key(name, timebuckets.Bucket(level, i)) for i in indexes]
            read = list(dynamo.batch_get_items(dynamodb, table, keys, READ_FAILED, projection=PROJECTION))
            keys_read += len(keys)
        found += read
    return {layout.bucket_of(item): decode_item(item) for item in found if _unexpired(item, now_ms // 1000)}, keys_read


# -- the names that exist ----------------------------------------------------------------------


def list_names(dynamodb: DynamoDB, settings: Settings, params: Mapping[str, str], now_ms: int) -> dict[str, Any]:
    """One page (core.pager) of the catalog of unique-count names (core.catalog), in name order. A
    window without names is refused: the listing has none, and ignoring it would answer another question."""
    if window_params.is_windowed(params):
        raise ValidationError(f"{', '.join(window_params.WINDOW_PARAMS)} count a union: give names too")
    request = pager.page_request(params, lambda n: validation.name(n, "cursor"))
    entries, cursor = catalog.touched_page(dynamodb, settings, layout.CATALOG_KIND, request, now_ms)
    return {"names": [{"name": e.name, "last_seen": times.iso(e.last_seen_ms)} for e in entries], "next": cursor}
