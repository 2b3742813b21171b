"""Windowed counts: a window read from its day and hour items, and histograms.

The buckets are written by chalicelib.counters.stream_apply; their keys are in chalicelib.counter_keys.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from chalicelib.core import dynamo, keyspace, timebuckets, validation
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.counters import keys as counter_keys

MAX_HISTOGRAM_BUCKETS = 5000
MAX_WINDOW_MINUTES = 400 * 1440


# -- reads -------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowCount:
    counter: str
    count: int
    first_minute: int
    last_minute: int
    keys_read: int
    complete: bool
    retained_from_ms: int

    def as_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "counter": self.counter,
            "count": self.count,
            "start": validation.iso(self.first_minute * timebuckets.MINUTE_MS),
            "end": validation.iso((self.last_minute + 1) * timebuckets.MINUTE_MS),
            "keys_read": self.keys_read,
            "complete": self.complete,
        }
        if not self.complete:
            answer["retained_from"] = validation.iso(self.retained_from_ms)
            answer["message"] = "the window starts before the counter's retention: older events are no longer counted"
        return answer


def count_window(
    dynamodb: Any,
    settings: Settings,
    counter: str,
    first_minute: int,
    last_minute: int,
    now_ms: int,
    sleep: Callable[[float], None] = time.sleep,
) -> WindowCount:
    if last_minute - first_minute + 1 > MAX_WINDOW_MINUTES:
        raise ValidationError(f"a window may span at most {MAX_WINDOW_MINUTES // 1440} days")
    parts = timebuckets.plan(first_minute, last_minute)
    keys = [counter_keys.bucket_key(counter, p.bucket) for p in parts]
    found = _batch_get(dynamodb, settings, keys, sleep)
    now_s = now_ms // 1000
    total = 0
    retention = 0
    for part, key in zip(parts, keys):
        item = found.get((key["pk"]["S"], key["sk"]["S"]))
        if item is None:
            continue
        retention = max(retention, int(item.get("retention", {"N": "0"})["N"]))
        if int(item["expires_at"]["N"]) > now_s:
            total += _part_count(item, part)
    retention = retention or settings.default_retention_seconds
    retained_from = now_ms - retention * 1000
    complete = (first_minute + 1) * timebuckets.MINUTE_MS > retained_from
    return WindowCount(counter, total, first_minute, last_minute, len(keys), complete, retained_from)


def _part_count(item: dict[str, Any], part: timebuckets.Part) -> int:
    if part.minutes is None:
        return int(item["n"]["N"])
    first, last = part.minutes
    return sum(int(item.get(counter_keys.minute_attribute(m), {"N": "0"})["N"]) for m in range(first, last + 1))


def _batch_get(
    dynamodb: Any, settings: Settings, keys: list[dict[str, Any]], sleep: Callable[[float], None]
) -> dict[tuple[str, str], dict[str, Any]]:
    items = dynamo.batch_get_items(dynamodb, settings.counts_table, keys, "could not read the counts", sleep)
    return {(item["pk"]["S"], item["sk"]["S"]): item for item in items}


def histogram(
    dynamodb: Any,
    settings: Settings,
    counter: str,
    first_minute: int,
    last_minute: int,
    resolution: timebuckets.Resolution,
    now_ms: int,
) -> dict[str, Any]:
    if timebuckets.bucket_count(first_minute, last_minute, resolution) > MAX_HISTOGRAM_BUCKETS:
        raise ValidationError(f"a histogram has at most {MAX_HISTOGRAM_BUCKETS} buckets; use a coarser resolution")
    buckets = timebuckets.buckets_between(first_minute, last_minute, resolution)
    # Minutes live inside their hour items: a minute series is read from hour items.
    stored = "hour" if resolution == "minute" else resolution
    counts: dict[int, int] = {}
    for bucket_index, item in _query_buckets(dynamodb, settings, counter, stored, buckets[0], buckets[-1], now_ms):
        if resolution == "minute":
            for m in range(60):
                value = item.get(counter_keys.minute_attribute(m))
                if value is not None:
                    counts[bucket_index * 60 + m] = int(value["N"])
        else:
            counts[bucket_index] = int(item["n"]["N"])
    return {
        "counter": counter,
        "resolution": resolution,
        "start": validation.iso(buckets[0].start_ms),
        "end": validation.iso(buckets[-1].end_ms),
        "buckets": [{"start": validation.iso(b.start_ms), "count": counts.get(b.index, 0)} for b in buckets],
    }


def _query_buckets(
    dynamodb: Any,
    settings: Settings,
    counter: str,
    resolution: str,
    first: timebuckets.Bucket,
    last: timebuckets.Bucket,
    now_ms: int,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Live stored buckets of one resolution covering first..last (paginated Query)."""
    size = timebuckets.RESOLUTION_MINUTES[resolution]
    lo, hi = first.first_minute // size, last.first_minute // size
    query: dict[str, Any] = {
        "TableName": settings.counts_table,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
        "ExpressionAttributeValues": {
            ":pk": {"S": f"{keyspace.COUNTER}{counter}"},
            ":lo": {"S": counter_keys.bucket_sort_key(resolution, lo)},
            ":hi": {"S": counter_keys.bucket_sort_key(resolution, hi)},
        },
    }
    now_s = now_ms // 1000
    for page in dynamo.query_pages(dynamodb, query, "could not read the counts"):
        for item in page.get("Items", []):
            if int(item["expires_at"]["N"]) > now_s:
                yield int(item["sk"]["S"].split("#", 1)[1]), item
