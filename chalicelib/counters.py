"""Windowed counts: apply stream batches exactly once, answer windows and histograms.

Counts live in the counts table, one item per (counter, bucket):
    pk "CTR#<counter>", sk "m#<minute>" / "h#<hour>" / "d#<day>" (indexes since the epoch).
Each counted event leaves an idempotency marker "EVT#<counter>#<id>" written in the same
transaction as the bucket increments, so a redelivered record finds its marker and the
transaction drops it; a handler that dies between transactions leaves nothing half-applied.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Iterable

from botocore.exceptions import ClientError

from chalicelib import timebuckets, validation
from chalicelib.errors import StorageError, ValidationError
from chalicelib.events import Event
from chalicelib.settings import Settings
from chalicelib.stream_records import StreamRecord
from chalicelib.timebuckets import Bucket

MAX_TRANSACTION_ITEMS = 100
MAX_BATCH_GET_KEYS = 100
MAX_HISTOGRAM_BUCKETS = 5000
MAX_WINDOW_MINUTES = 400 * 1440
QUARANTINE_TTL_SECONDS = 30 * 86400
QUARANTINE_PK = "QUARANTINE#events-stream"
_RETRYABLE_REASONS = {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
_PREFIX = {"minute": "m", "hour": "h", "day": "d"}


# -- keys -------------------------------------------------------------------------------

def bucket_key(counter: str, bucket: Bucket) -> dict[str, Any]:
    return {"pk": {"S": f"CTR#{counter}"}, "sk": {"S": _bucket_sort_key(bucket.resolution, bucket.index)}}


def _bucket_sort_key(resolution: str, index: int) -> str:
    return f"{_PREFIX[resolution]}#{index:010d}"


def marker_key(counter: str, event_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"EVT#{counter}#{event_id}"}, "sk": {"S": "#"}}


# -- the stream handler ----------------------------------------------------------------

@dataclass
class BatchResult:
    counted: int = 0
    duplicates: int = 0
    skipped: int = 0  # not INSERT, or not an event item
    expired: int = 0  # older than its own retention: nothing left to count it in
    quarantined: list[str] = field(default_factory=list)
    transactions: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "counted": self.counted,
            "duplicates": self.duplicates,
            "skipped": self.skipped,
            "expired": self.expired,
            "quarantined": len(self.quarantined),
            "transactions": self.transactions,
        }


def event_from_image(image: dict[str, Any]) -> Event:
    """The countable part of an events-table item; ValidationError if it is malformed."""
    counter = validation.name(image.get("counter"), "counter")
    event_id = image.get("id")
    if not isinstance(event_id, str) or not 1 <= len(event_id) <= 128:
        raise ValidationError("id must be a string of 1-128 characters")
    t = image.get("time")
    if not isinstance(t, Decimal) or t != t.to_integral_value():
        raise ValidationError("time must be an integer number of milliseconds")
    retention = image.get("retention")
    if not isinstance(retention, Decimal) or retention != retention.to_integral_value() or retention < 60:
        raise ValidationError("retention must be an integer number of seconds >= 60")
    return Event(counter, event_id, validation.time_ms(int(t)), int(retention))


def apply_stream_batch(
    dynamodb: Any,
    settings: Settings,
    records: Iterable[StreamRecord],
    now_ms: int,
    sleep: Callable[[float], None] = time.sleep,
) -> BatchResult:
    result = BatchResult()
    pending: dict[tuple[str, str], Event] = {}
    for record in records:
        if record.event_name != "INSERT" or (record.new_image or {}).get("kind", "event") != "event":
            result.skipped += 1
            continue
        try:
            if record.error:
                raise ValidationError(record.error)
            event = event_from_image(record.new_image or {})
        except ValidationError as exc:
            _quarantine(dynamodb, settings, record, str(exc), now_ms)
            result.quarantined.append(record.event_id)
            continue
        identity = (event.counter, event.id)
        if identity in pending:
            result.duplicates += 1
        elif not _live_buckets(event, now_ms):
            result.expired += 1
        else:
            pending[identity] = event
    # Sorting keeps events of the same counter and minute together, so they share updates.
    ordered = sorted(pending.values(), key=lambda e: (e.counter, e.time_ms))
    for chunk in _chunks(ordered, now_ms):
        counted, duplicates, transactions = _commit(dynamodb, settings, chunk, now_ms, sleep)
        result.counted += counted
        result.duplicates += duplicates
        result.transactions += transactions
    return result


def _live_buckets(event: Event, now_ms: int) -> list[Bucket]:
    """Buckets of the event that have not yet expired; expired ones would read as 0."""
    return [b for b in timebuckets.buckets_for(event.time_ms) if _bucket_expiry_s(b, event) * 1000 > now_ms]


def _bucket_expiry_s(bucket: Bucket, event: Event) -> int:
    return bucket.end_ms // 1000 + event.retention_seconds


def _chunks(events: list[Event], now_ms: int) -> Iterable[list[Event]]:
    """Groups of events whose markers plus distinct bucket updates fit one transaction."""
    chunk: list[Event] = []
    buckets: set[tuple[str, Bucket]] = set()
    for event in events:
        new = {(event.counter, b) for b in _live_buckets(event, now_ms)} - buckets
        if chunk and len(chunk) + 1 + len(buckets) + len(new) > MAX_TRANSACTION_ITEMS:
            yield chunk
            chunk, buckets = [], set()
            new = {(event.counter, b) for b in _live_buckets(event, now_ms)}
        chunk.append(event)
        buckets |= new
    if chunk:
        yield chunk


def _transaction(settings: Settings, chunk: list[Event], now_ms: int) -> list[dict[str, Any]]:
    now_s = now_ms // 1000
    table = settings.counts_table
    items: list[dict[str, Any]] = [
        {
            "Put": {
                "TableName": table,
                "Item": {
                    **marker_key(e.counter, e.id),
                    "expires_at": {"N": str(now_s + settings.marker_ttl_seconds)},
                },
                # A marker past its expiry may linger until DynamoDB deletes it: it no longer counts.
                "ConditionExpression": "attribute_not_exists(pk) OR expires_at < :now",
                "ExpressionAttributeValues": {":now": {"N": str(now_s)}},
            }
        }
        for e in chunk
    ]
    increments: Tally[tuple[str, Bucket]] = Tally()
    expiry: dict[tuple[str, Bucket], int] = {}
    retention: dict[tuple[str, Bucket], int] = {}
    for e in chunk:
        for bucket in _live_buckets(e, now_ms):
            key = (e.counter, bucket)
            increments[key] += 1
            expiry[key] = max(expiry.get(key, 0), _bucket_expiry_s(bucket, e))
            retention[key] = max(retention.get(key, 0), e.retention_seconds)
    for (counter, bucket), n in sorted(increments.items()):
        items.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": bucket_key(counter, bucket),
                    # The first event sets a bucket's expiry; later ones only add to the count.
                    "UpdateExpression": "ADD #n :n SET expires_at = if_not_exists(expires_at, :exp), "
                    "#r = if_not_exists(#r, :r)",
                    "ExpressionAttributeNames": {"#n": "n", "#r": "retention"},
                    "ExpressionAttributeValues": {
                        ":n": {"N": str(n)},
                        ":exp": {"N": str(expiry[(counter, bucket)])},
                        ":r": {"N": str(retention[(counter, bucket)])},
                    },
                }
            }
        )
    return items


def _commit(
    dynamodb: Any, settings: Settings, chunk: list[Event], now_ms: int, sleep: Callable[[float], None]
) -> tuple[int, int, int]:
    """Apply one chunk; returns (counted, duplicates, transactions attempted)."""
    duplicates = 0
    transactions = 0
    backoff = 0
    while chunk:
        transactions += 1
        try:
            dynamodb.transact_write_items(TransactItems=_transaction(settings, chunk, now_ms))
            return len(chunk), duplicates, transactions
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise StorageError("counting transaction failed") from exc
            reasons = [r.get("Code", "None") for r in exc.response.get("CancellationReasons", [])]
        seen = [i for i, code in enumerate(reasons[: len(chunk)]) if code == "ConditionalCheckFailed"]
        if seen:
            # Those markers exist: already counted by an earlier delivery. Retry the rest.
            duplicates += len(seen)
            chunk = [e for i, e in enumerate(chunk) if i not in set(seen)]
            continue
        if reasons and all(code in _RETRYABLE_REASONS | {"None"} for code in reasons) and backoff < 6:
            sleep(min(0.05 * 2**backoff, 2.0))
            backoff += 1
            continue
        raise StorageError(f"counting transaction cancelled: {reasons}")
    return 0, duplicates, transactions


def _quarantine(dynamodb: Any, settings: Settings, record: StreamRecord, reason: str, now_ms: int) -> None:
    """Set a record that cannot be counted aside, keyed by its stream event id (idempotent)."""
    try:
        dynamodb.put_item(
            TableName=settings.counts_table,
            Item={
                "pk": {"S": QUARANTINE_PK},
                "sk": {"S": record.event_id or record.sequence_number},
                "reason": {"S": reason},
                "record": {"S": record.raw_json()},
                "seen_at": {"S": validation.iso(now_ms)},
                "expires_at": {"N": str(now_ms // 1000 + QUARANTINE_TTL_SECONDS)},
            },
        )
    except ClientError as exc:
        raise StorageError("could not set a bad stream record aside") from exc


def quarantined(dynamodb: Any, settings: Settings, limit: int = 100) -> list[dict[str, str]]:
    """Records the stream handler set aside, newest first by stream event id order."""
    try:
        response = dynamodb.query(
            TableName=settings.counts_table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": QUARANTINE_PK}},
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
    keys = [bucket_key(counter, t.bucket) for t in terms]
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
            ":lo": {"S": _bucket_sort_key(resolution, buckets[0].index)},
            ":hi": {"S": _bucket_sort_key(resolution, buckets[-1].index)},
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
