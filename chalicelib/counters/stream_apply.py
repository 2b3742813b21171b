"""Applying a DynamoDB stream batch to the windowed counters, exactly once.

Lambda delivers stream records at least once, and a handler may die between two writes.
Every counted event therefore leaves proof in the same TransactWriteItems as its bucket
increments, and a transaction that finds the proof already there is cancelled for exactly
that reason and retried without the events it names:
- an event with a client id leaves a marker `EVT#<counter>#<id>` (so a client that retries a
  POST, which stores a second item, is still counted once);
- an event with a generated id is known by its events-table key, recorded in a ledger item
  per events partition and ingest second: one small write covers many events, where a marker
  per event would double the cost of counting.
Increments of one bucket within a transaction are summed into one update.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import quarantine, timebuckets, transactions, validation
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.errors import StorageError, ValidationError
from chalicelib.core.settings import Settings
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import catalog
from chalicelib.counters import keys as counter_keys
from chalicelib.events.ingest import Event
from chalicelib.events.stream_records import StreamRecord

MAX_TRANSACTION_ITEMS = 100
Sleep = Callable[[float], None]


@dataclass(frozen=True)
class Countable:
    event: Event
    proof_key: tuple[str, str]  # the marker or ledger item that proves it was counted
    entry: str | None  # the ledger entry; None for a marker
    buckets: tuple[Bucket, ...] = ()  # where it is counted: its buckets not yet expired

    @property
    def identity(self) -> tuple[str, str, str | None]:
        return (*self.proof_key, self.entry)


def countable_from_image(image: dict[str, Any], ledger_seconds: int) -> Countable:
    """What an events-table item counts as; ValidationError if it is malformed."""
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
    event = Event(
        counter, event_id, validation.time_ms(int(t)), int(retention), id_given=image.get("id_given") is not False
    )
    ledger = None
    if not event.id_given and isinstance(image.get("pk"), str) and isinstance(image.get("sk"), str):
        ledger = counter_keys.ledger_key_and_entry(image["pk"], image["sk"], ledger_seconds)
    if ledger is None:
        key = counter_keys.marker_key(counter, event_id)
        return Countable(event, (key["pk"]["S"], key["sk"]["S"]), None)
    key, entry = ledger
    return Countable(event, (key["pk"]["S"], key["sk"]["S"]), entry)


def apply_stream_batch(
    dynamodb: Any, settings: Settings, records: Iterable[StreamRecord], now_ms: int, sleep: Sleep = time.sleep
) -> BatchResult:
    records = list(records)
    result = BatchResult(records=len(records))
    pending: dict[tuple[str, str, str | None], Countable] = {}
    for record in records:
        if record.event_name != "INSERT" or (record.new_image or {}).get("kind", "event") != "event":
            result.details["skipped"] += 1
            continue
        try:
            if record.error:
                raise ValidationError(record.error)
            countable = countable_from_image(record.new_image or {}, settings.ledger_seconds)
        except ValidationError as exc:
            _quarantine(dynamodb, settings, record, str(exc), now_ms)
            result.quarantined.append(record.event_id)
            continue
        buckets = live_buckets(countable.event, now_ms)
        if countable.identity in pending:
            result.duplicates += 1
        elif not buckets:
            result.details["expired"] += 1
        else:
            pending[countable.identity] = replace(countable, buckets=tuple(buckets))
    # Sorting keeps events of one counter and minute together, so they share updates.
    ordered = sorted(pending.values(), key=lambda c: (c.event.counter, c.event.time_ms))
    catalog.record(dynamodb, settings, (c.event for c in ordered), now_ms)  # GET /counters
    for chunk in _chunks(ordered):
        counted, duplicates, attempts = _commit(dynamodb, settings, chunk, now_ms, sleep)
        result.counted += counted
        result.duplicates += duplicates
        result.transactions += attempts
    return result


def live_buckets(event: Event, now_ms: int) -> list[Bucket]:
    """Buckets of the event that have not expired yet; an expired one would read as 0."""
    return [b for b in timebuckets.buckets_for(event.time_ms) if _bucket_expiry_s(b, event) * 1000 > now_ms]


def _bucket_expiry_s(bucket: Bucket, event: Event) -> int:
    return bucket.end_ms // 1000 + event.retention_seconds


def _items_needed(countable: Countable) -> set[tuple[str, Any]]:
    """The distinct transaction items an event needs besides its own marker."""
    needed: set[tuple[str, Any]] = {("bucket", (countable.event.counter, b)) for b in countable.buckets}
    if countable.entry is not None:
        needed.add(("ledger", countable.proof_key))
    return needed


def _chunks(countables: list[Countable]) -> Iterable[list[Countable]]:
    """Groups of events whose transaction items fit in one TransactWriteItems."""
    chunk: list[Countable] = []
    shared: set[tuple[str, Any]] = set()
    markers = 0
    for countable in countables:
        needed = _items_needed(countable)
        marker = 1 if countable.entry is None else 0
        if chunk and markers + marker + len(shared | needed) > MAX_TRANSACTION_ITEMS:
            yield chunk
            chunk, shared, markers = [], set(), 0
        chunk.append(countable)
        shared |= needed
        markers += marker
    if chunk:
        yield chunk


def _transaction(settings: Settings, chunk: list[Countable], now_ms: int) -> transactions.Plan[Countable]:
    """The items of one counting transaction; a marker is owned by its event, a ledger by the
    first of its events (which names the ledger), a bucket by none."""
    now_s = now_ms // 1000
    table = settings.counts_table
    expires = str(now_s + settings.marker_ttl_seconds)
    items: list[dict[str, Any]] = []
    owners: list[Countable | None] = []
    ledgers: dict[tuple[str, str], list[str]] = {}
    first_of_ledger: dict[tuple[str, str], Countable] = {}
    for c in chunk:
        if c.entry is None:
            items.append(
                {
                    "Put": {
                        "TableName": table,
                        "Item": {
                            "pk": {"S": c.proof_key[0]},
                            "sk": {"S": c.proof_key[1]},
                            "expires_at": {"N": expires},
                        },
                        # A marker past its expiry may linger until DynamoDB deletes it: it no longer counts.
                        "ConditionExpression": "attribute_not_exists(pk) OR expires_at < :now",
                        "ExpressionAttributeValues": {":now": {"N": str(now_s)}},
                    }
                }
            )
            owners.append(c)
        else:
            ledgers.setdefault(c.proof_key, []).append(c.entry)
            first_of_ledger.setdefault(c.proof_key, c)
    for proof_key, entries in sorted(ledgers.items()):
        values = {f":e{i}": {"S": e} for i, e in enumerate(entries)}
        items.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": {"pk": {"S": proof_key[0]}, "sk": {"S": proof_key[1]}},
                    "UpdateExpression": "ADD #e :new SET expires_at = :exp",
                    "ConditionExpression": " AND ".join(f"NOT contains(#e, {name})" for name in values),
                    "ExpressionAttributeNames": {"#e": "entries"},
                    "ExpressionAttributeValues": {**values, ":new": {"SS": entries}, ":exp": {"N": expires}},
                }
            }
        )
        owners.append(first_of_ledger[proof_key])
    increments: Tally[tuple[str, Bucket]] = Tally()
    minutes: dict[tuple[str, Bucket], Tally[int]] = {}
    expiry: dict[tuple[str, Bucket], int] = {}
    retention: dict[tuple[str, Bucket], int] = {}
    for c in chunk:
        for bucket in c.buckets:
            key = (c.event.counter, bucket)
            increments[key] += 1
            if bucket.resolution == "hour":
                minutes.setdefault(key, Tally())[timebuckets.minute_of_hour(c.event.time_ms)] += 1
            expiry[key] = max(expiry.get(key, 0), _bucket_expiry_s(bucket, c.event))
            retention[key] = max(retention.get(key, 0), c.event.retention_seconds)
    for (counter, bucket), n in sorted(increments.items()):
        names = {"#n": "n", "#r": "retention"}
        values = {
            ":n": {"N": str(n)},
            ":exp": {"N": str(expiry[(counter, bucket)])},
            ":r": {"N": str(retention[(counter, bucket)])},
        }
        adds = ["#n :n"]
        for minute, k in sorted(minutes.get((counter, bucket), Tally()).items()):
            names[f"#m{minute}"] = counter_keys.minute_attribute(minute)
            values[f":m{minute}"] = {"N": str(k)}
            adds.append(f"#m{minute} :m{minute}")
        items.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": counter_keys.bucket_key(counter, bucket),
                    # The first event sets a bucket's expiry; later ones only add to the counts.
                    "UpdateExpression": f"ADD {', '.join(adds)} SET expires_at = if_not_exists(expires_at, :exp), "
                    "#r = if_not_exists(#r, :r)",
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                }
            }
        )
        owners.append(None)
    return transactions.Plan(items, owners)


def _commit(
    dynamodb: Any, settings: Settings, chunk: list[Countable], now_ms: int, sleep: Sleep
) -> tuple[int, int, int]:
    """Apply one chunk; returns (counted, duplicates, transactions attempted)."""

    def already_counted(failed: list[Countable | None], pending: list[Countable]) -> list[Countable]:
        seen = [c for c in failed if c is not None and c.entry is None]
        for ledger in {c.proof_key for c in failed if c is not None and c.entry is not None}:
            counted = _ledger_entries(dynamodb, settings, ledger)
            seen += [c for c in pending if c.proof_key == ledger and c.entry in counted]
        return seen

    outcome = transactions.write(
        dynamodb,
        chunk,
        lambda pending: _transaction(settings, pending, now_ms),
        what="counting transaction",
        duplicates=already_counted,
        # A ledger whose condition failed on entries it no longer shows was raced: try again.
        retry_failed_conditions=True,
        attempts=6,
        sleep=sleep,
    )
    return len(outcome.applied), len(outcome.duplicates), outcome.attempts


def _ledger_entries(dynamodb: Any, settings: Settings, proof_key: tuple[str, str]) -> set[str]:
    try:
        response = dynamodb.get_item(
            TableName=settings.counts_table,
            Key={"pk": {"S": proof_key[0]}, "sk": {"S": proof_key[1]}},
            ConsistentRead=True,
            ProjectionExpression="entries",
        )
    except ClientError as exc:
        raise StorageError("could not read a counting ledger") from exc
    return set(response.get("Item", {}).get("entries", {}).get("SS", []))


def _quarantine(dynamodb: Any, settings: Settings, record: StreamRecord, reason: str, now_ms: int) -> None:
    """Set a record that cannot be counted aside, keyed by its stream event id."""
    quarantine.put(
        dynamodb,
        settings,
        "events-stream",
        record.event_id or record.sequence_number,
        record.raw_json(),
        reason,
        now_ms,
    )
