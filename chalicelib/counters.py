"""Windowed counts: answer a window from the fewest buckets, a histogram, the quarantine.

The buckets are written by chalicelib.counting; their keys are in chalicelib.counter_keys.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from botocore.exceptions import ClientError

from chalicelib import counter_keys, timebuckets, validation
from chalicelib.errors import StorageError, ValidationError
from chalicelib.settings import Settings

MAX_BATCH_GET_KEYS = 100
MAX_HISTOGRAM_BUCKETS = 5000
MAX_WINDOW_MINUTES = 400 * 1440


def quarantined(dynamodb: Any, settings: Settings, limit: int = 100) -> list[dict[str, str]]:
    """Records the stream handler set aside (up to `limit`)."""
    try:
        response = dynamodb.query(
            TableName=settings.counts_table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": counter_keys.QUARANTINE_PK}},
            Limit=limit,
        )
    except ClientError as exc:
        raise StorageError("could not read the quarantine") from exc
    return [
        {"event_id": i["sk"]["S"], "reason": i["reason"]["S"], "seen_at": i["seen_at"]["S"], "record": i["record"]["S"]}
        for i in response.get("Items", [])
    ]


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
    terms = timebuckets.decompose(first_minute, last_minute)
    keys = [counter_keys.bucket_key(counter, t.bucket) for t in terms]
    found = _batch_get(dynamodb, settings, keys, sleep)
    now_s = now_ms // 1000
    total = 0
    retention = 0
    for term, key in zip(terms, keys):
        item = found.get((key["pk"]["S"], key["sk"]["S"]))
        if item is None:
            continue
        retention = max(retention, int(item.get("retention", {"N": "0"})["N"]))
        if int(item["expires_at"]["N"]) > now_s:
            total += term.sign * int(item["n"]["N"])
    retention = retention or settings.default_retention_seconds
    retained_from = now_ms - retention * 1000
    complete = (first_minute + 1) * timebuckets.MINUTE_MS > retained_from
    return WindowCount(counter, total, first_minute, last_minute, len(keys), complete, retained_from)


def _batch_get(
    dynamodb: Any, settings: Settings, keys: list[dict[str, Any]], sleep: Callable[[float], None]
) -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for start in range(0, len(keys), MAX_BATCH_GET_KEYS):
        request: dict[str, Any] = {
            settings.counts_table: {
                "Keys": keys[start : start + MAX_BATCH_GET_KEYS],
                "ProjectionExpression": "pk, sk, #n, expires_at, #r",
                "ExpressionAttributeNames": {"#n": "n", "#r": "retention"},
            }
        }
        for attempt in range(8):
            try:
                response = dynamodb.batch_get_item(RequestItems=request)
            except ClientError as exc:
                raise StorageError("could not read the counts") from exc
            for item in response.get("Responses", {}).get(settings.counts_table, []):
                found[(item["pk"]["S"], item["sk"]["S"])] = item
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            sleep(min(0.05 * 2**attempt, 2.0))
        else:
            raise StorageError("the counts table kept returning unprocessed keys")
    return found


def histogram(
    dynamodb: Any,
    settings: Settings,
    counter: str,
    first_minute: int,
    last_minute: int,
    resolution: timebuckets.Resolution,
    now_ms: int,
) -> dict[str, Any]:
    buckets = timebuckets.buckets_between(first_minute, last_minute, resolution)
    if len(buckets) > MAX_HISTOGRAM_BUCKETS:
        raise ValidationError(f"a histogram has at most {MAX_HISTOGRAM_BUCKETS} buckets; use a coarser resolution")
    counts: dict[int, int] = {}
    now_s = now_ms // 1000
    query: dict[str, Any] = {
        "TableName": settings.counts_table,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
        "ExpressionAttributeValues": {
            ":pk": {"S": f"CTR#{counter}"},
            ":lo": {"S": counter_keys.bucket_sort_key(resolution, buckets[0].index)},
            ":hi": {"S": counter_keys.bucket_sort_key(resolution, buckets[-1].index)},
        },
        "ProjectionExpression": "sk, #n, expires_at",
        "ExpressionAttributeNames": {"#n": "n"},
    }
    while True:
        try:
            response = dynamodb.query(**query)
        except ClientError as exc:
            raise StorageError("could not read the counts") from exc
        for item in response.get("Items", []):
            if int(item["expires_at"]["N"]) > now_s:
                counts[int(item["sk"]["S"].split("#", 1)[1])] = int(item["n"]["N"])
        if "LastEvaluatedKey" not in response:
            break
        query["ExclusiveStartKey"] = response["LastEvaluatedKey"]
    return {
        "counter": counter,
        "resolution": resolution,
        "start": validation.iso(buckets[0].start_ms),
        "end": validation.iso(buckets[-1].end_ms),
        "buckets": [{"start": validation.iso(b.start_ms), "count": counts.get(b.index, 0)} for b in buckets],
    }
