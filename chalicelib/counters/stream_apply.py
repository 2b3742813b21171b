"""Applying a DynamoDB stream batch to the windowed counters, exactly once.

Lambda delivers stream records at least once, and a handler may die between two writes.
Every counted event therefore leaves proof in the same TransactWriteItems as its bucket
increments, and a transaction that finds the proof already there is cancelled for exactly
that reason and retried without the events it names. The proof costs the same whatever the
ingest rate, and no item grows with traffic:

- an event whose id Tally generated is proven by its position in the stream: per events-table
  partition key (quarter hour plus write shard) the item `SEQ#<events pk>` holds the highest
  stream sequence number counted, set in the same transaction as the increments, on condition
  that it is below every sequence number the transaction counts for that partition. One small
  item per partition and transaction, whatever the number of events in it.
- an event with a client id keeps a marker `EVT#<counter>#<id>`, so a client that retries a
  POST (which stores a second item, with its own stream record) is still counted once.

The guarantee this relies on (docs/counting.md has the sources and where it breaks):
  the records of one events partition key reach this handler in increasing sequence-number
  order, and a record is only delivered after every earlier record of its partition was
  delivered in a batch that succeeded (or is in the same batch, before it).
DynamoDB Streams keep every item key in one shard at a time, a partition key's items live in
one table partition, each shard's records carry increasing sequence numbers, and Lambda's
event source mapping (ParallelizationFactor 1, Chalice's default) hands a shard's records to
one invocation at a time, in order, parent shards before their children, retrying a failed
batch (or, with bisection, its halves in order) before anything after it. So a record whose
sequence number is not above its partition's position has been counted already.

Within a batch events are applied in stream order, chunk by chunk, so each transaction
counts a prefix of what is left of every partition: a handler that dies between two
transactions leaves positions that name exactly what was applied. Increments of one bucket
within a transaction are summed into one update; a transaction takes as many events as its
100 items allow (for a few counters, a whole batch of 1,000).

A bucket lives as long as the longest retention of any event counted in it: an update raises
its `retention` and `expires_at` on condition that the stored retention is not larger, and
when it is, the update is retried leaving them alone.

A record that cannot be counted (a malformed image, text DynamoDB will not store, a key that
cannot be built, anything that makes DynamoDB reject its transaction, whatever the exception)
is set aside alone under `QUARANTINE#events-stream` on its first delivery, and the rest of the
batch is counted; a rejected transaction is split in halves until the record is found. Only a
failure that is not about one record (storage unavailable or throttled after retries) fails
the batch, for Lambda to deliver again.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import keyspace, quarantine, timebuckets, transactions
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError, ValidationError, about_storage, reason
from chalicelib.core.settings import Settings
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import catalog
from chalicelib.counters import keys as counter_keys
from chalicelib.events import ingest as events_ingest
from chalicelib.events.ingest import Event
from chalicelib.events.stream_records import StreamRecord

MAX_TRANSACTION_ITEMS = transactions.MAX_ITEMS


@dataclass(frozen=True)
class Countable:
    event: Event
    record: StreamRecord = field(compare=False, repr=False)
    marker: str | None = None  # pk of the marker proving a client-id event was counted
    partition: str | None = None  # events-table pk whose stream position proves it
    position: str = ""  # the record's sequence number, padded to sort as text
    buckets: tuple[Bucket, ...] = ()  # where it is counted: its buckets not yet expired

    @property
    def identity(self) -> tuple[str, str]:
        return ("marker", self.marker) if self.marker is not None else (f"position {self.partition}", self.position)

    def items_needed(self) -> set[tuple[str, ...]]:
        """The distinct transaction items counting this event takes."""
        needed: set[tuple[str, ...]] = {("bucket", self.event.counter, repr(b)) for b in self.buckets}
        needed.add(self.identity if self.marker is not None else ("position", self.partition or ""))
        return needed


def countable_from_record(record: StreamRecord) -> Countable:
    """What a stream record counts as; ValidationError (or ValueError) if it cannot be counted."""
    if record.error:
        raise ValidationError(record.error)
    image = record.new_image or {}
    event = events_ingest.from_item(image)
    counter, event_id = event.counter, event.id
    partition, position = image.get("pk"), counter_keys.sequence_position(record.sequence_number)
    if not event.id_given and isinstance(partition, str) and position is not None:
        counter_keys.position_key(partition)  # raises if no key can be built from it
        return Countable(event, record, partition=partition, position=position)
    # A client id, or a stored item without a stream position (written by hand): a marker.
    marker = counter_keys.marker_key(counter, event_id)["pk"]["S"]
    return Countable(event, record, marker=marker)


def apply_stream_batch(
    dynamodb: Any, settings: Settings, records: Iterable[StreamRecord], now_ms: int, sleep: Sleep | None = None
) -> BatchResult:
    records = list(records)
    result = BatchResult(records=len(records))
    pending: list[Countable] = []  # in stream order: each chunk must be a prefix per partition
    identities: set[tuple[str, str]] = set()
    last_position: dict[str, str] = {}
    for record in records:
        try:
            if record.event_name != "INSERT" or (record.new_image or {}).get("kind", "event") != "event":
                result.details["skipped"] += 1
                continue
            countable = countable_from_record(record)
            buckets = live_buckets(countable.event, now_ms)
        except Exception as exc:  # whatever it is, it is about this record alone
            _set_aside(dynamodb, settings, result, record, exc, now_ms)
            continue
        if countable.partition is not None:
            if countable.position < last_position.get(countable.partition, ""):
                # The order relied on is broken (docs/counting.md): make it visible in the log line.
                result.details["out_of_sequence"] += 1
            last_position[countable.partition] = max(countable.position, last_position.get(countable.partition, ""))
        if countable.identity in identities:
            result.duplicates += 1
        elif not buckets:
            result.details["expired"] += 1
        else:
            identities.add(countable.identity)
            pending.append(replace(countable, buckets=tuple(buckets)))
    catalog.record(dynamodb, settings, (c.event for c in pending), now_ms)  # GET /counters
    for chunk in chunks(pending):
        _apply_isolating(dynamodb, settings, chunk, now_ms, sleep, result)
    return result


def live_buckets(event: Event, now_ms: int) -> list[Bucket]:
    """Buckets of the event that have not expired yet; an expired one would read as 0."""
    return [b for b in timebuckets.buckets_for(event.time_ms) if timebuckets.live(b, event.retention_seconds, now_ms)]


def chunks(countables: list[Countable]) -> Iterable[list[Countable]]:
    """Consecutive runs of events (stream order kept) whose items fit in one TransactWriteItems."""
    chunk: list[Countable] = []
    items: set[tuple[str, ...]] = set()
    for countable in countables:
        needed = countable.items_needed()
        if chunk and len(items | needed) > MAX_TRANSACTION_ITEMS:
            yield chunk
            chunk, items = [], set()
        chunk.append(countable)
        items |= needed
    if chunk:
        yield chunk


def _apply_isolating(
    dynamodb: Any, settings: Settings, chunk: list[Countable], now_ms: int, sleep: Sleep | None, result: BatchResult
) -> None:
    """Apply a chunk; if its data is refused, split it until the records to blame are found alone."""
    try:
        outcome = _commit(dynamodb, settings, chunk, now_ms, sleep)
    except Exception as exc:
        if about_storage(exc):
            raise  # not about a record: the batch fails and Lambda delivers it again
        failure: Exception = exc  # a refusal of the data, a value the SDK cannot send: about some record
    else:
        result.counted += len(outcome.applied)
        result.duplicates += len(outcome.duplicates)
        result.transactions += outcome.attempts
        result.retries += outcome.retries
        return
    result.transactions += 1
    if len(chunk) == 1:
        _set_aside(dynamodb, settings, result, chunk[0].record, failure, now_ms)
        return
    half = len(chunk) // 2  # halves in stream order keep each transaction a prefix per partition
    _apply_isolating(dynamodb, settings, chunk[:half], now_ms, sleep, result)
    _apply_isolating(dynamodb, settings, chunk[half:], now_ms, sleep, result)


@dataclass
class _BucketUpdate:
    n: int = 0
    minutes: Tally[int] = field(default_factory=Tally)
    retention: int = 0


def _transaction(
    settings: Settings, chunk: list[Countable], now_ms: int, keep_stored: set[tuple[str, str]]
) -> transactions.Plan[Countable]:
    """The items of one counting transaction. A marker is owned by its event, a partition's
    position by the first of its events in the chunk, a bucket by none. Buckets in
    `keep_stored` are known to hold a longer retention than this chunk brings."""
    now_s = now_ms // 1000
    table = settings.counts_table
    expires = str(now_s + settings.marker_ttl_seconds)
    items: list[dict[str, Any]] = []
    owners: list[Countable | None] = []
    partitions: dict[str, list[Countable]] = {}
    for c in chunk:
        if c.marker is None:
            partitions.setdefault(c.partition or "", []).append(c)
            continue
        items.append(
            {
                "Put": {
                    "TableName": table,
                    "Item": {"pk": {"S": c.marker}, "sk": {"S": "#"}, "expires_at": {"N": expires}},
                    # A marker past its expiry may linger until DynamoDB deletes it: it no longer counts.
                    "ConditionExpression": "attribute_not_exists(pk) OR expires_at < :now",
                    "ExpressionAttributeValues": {":now": {"N": str(now_s)}},
                }
            }
        )
        owners.append(c)
    for partition, members in sorted(partitions.items()):
        positions = [c.position for c in members]
        items.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": counter_keys.position_key(partition),
                    "UpdateExpression": "SET #s = :last, expires_at = :exp",
                    "ConditionExpression": "attribute_not_exists(#s) OR #s < :first",
                    "ExpressionAttributeNames": {"#s": "seq"},
                    "ExpressionAttributeValues": {
                        ":first": {"S": min(positions)},
                        ":last": {"S": max(positions)},
                        ":exp": {"N": expires},
                    },
                }
            }
        )
        owners.append(members[0])
    updates: dict[tuple[str, Bucket], _BucketUpdate] = {}
    for c in chunk:
        for bucket in c.buckets:
            update = updates.setdefault((c.event.counter, bucket), _BucketUpdate())
            update.n += 1
            if bucket.resolution == "hour":
                update.minutes[timebuckets.minute_of_hour(c.event.time_ms)] += 1
            update.retention = max(update.retention, c.event.retention_seconds)
    for (counter, bucket), update in sorted(updates.items()):
        items.append(_bucket_update(table, counter, bucket, update, keep_stored))
        owners.append(None)
    return transactions.Plan(items, owners)


def _bucket_update(
    table: str, counter: str, bucket: Bucket, update: _BucketUpdate, keep_stored: set[tuple[str, str]]
) -> dict[str, Any]:
    key = counter_keys.bucket_key(counter, bucket)
    names = {"#n": "n", "#r": "retention"}
    values = {
        ":n": {"N": str(update.n)},
        ":exp": {"N": str(timebuckets.expires_at_s(bucket, update.retention))},
        ":r": {"N": str(update.retention)},
    }
    adds = ["#n :n"]
    for minute, k in sorted(update.minutes.items()):
        names[f"#m{minute}"] = counter_keys.minute_attribute(minute)
        values[f":m{minute}"] = {"N": str(k)}
        adds.append(f"#m{minute} :m{minute}")
    request: dict[str, Any] = {"TableName": table, "Key": key, "ExpressionAttributeNames": names}
    if (key["pk"]["S"], key["sk"]["S"]) in keep_stored:
        # The stored retention is longer: count, and leave the expiry it set.
        request["UpdateExpression"] = (
            f"ADD {', '.join(adds)} SET expires_at = if_not_exists(expires_at, :exp), #r = if_not_exists(#r, :r)"
        )
    else:
        # Later events can only extend a bucket's life: the condition keeps the longer one.
        request["UpdateExpression"] = f"ADD {', '.join(adds)} SET expires_at = :exp, #r = :r"
        request["ConditionExpression"] = "attribute_not_exists(#r) OR #r <= :r"
    request["ExpressionAttributeValues"] = values
    return {"Update": request}


def _commit(
    dynamodb: Any, settings: Settings, chunk: list[Countable], now_ms: int, sleep: Sleep | None
) -> transactions.Outcome[Countable]:
    keep_stored: set[tuple[str, str]] = set()

    def already_counted(failed: list[Countable | None], pending: list[Countable]) -> list[Countable]:
        seen = [c for c in failed if c is not None and c.marker is not None]
        for partition in {c.partition for c in failed if c is not None and c.partition is not None}:
            counted_up_to = _position(dynamodb, settings, partition)
            if counted_up_to is not None:
                seen += [c for c in pending if c.partition == partition and c.position <= counted_up_to]
        return seen

    def keep_longer_retention(failed_items: list[dict[str, Any]]) -> bool:
        buckets = {
            (key["pk"]["S"], key["sk"]["S"])
            for item in failed_items
            if (key := item.get("Update", {}).get("Key", {})) and key["pk"]["S"].startswith(keyspace.COUNTER)
        }
        new = buckets - keep_stored
        keep_stored.update(new)
        return bool(new)

    return transactions.write(
        dynamodb,
        chunk,
        lambda pending: _transaction(settings, pending, now_ms, keep_stored),
        what="counting transaction",
        duplicates=already_counted,
        adapt=keep_longer_retention,
        attempts=6,
        sleep=sleep,
    )


def _position(dynamodb: Any, settings: Settings, partition: str) -> str | None:
    """How far the stream of one events partition has been counted (padded sequence number)."""
    try:
        response = dynamodb.get_item(
            TableName=settings.counts_table,
            Key=counter_keys.position_key(partition),
            ConsistentRead=True,
            ProjectionExpression="#s",
            ExpressionAttributeNames={"#s": "seq"},
        )
    except ClientError as exc:
        raise StorageError("could not read a counting position") from exc
    value = response.get("Item", {}).get("seq", {}).get("S")
    return value if isinstance(value, str) else None


def _set_aside(
    dynamodb: Any, settings: Settings, result: BatchResult, record: StreamRecord, exc: Exception, now_ms: int
) -> None:
    """Put one record that cannot be counted aside, keyed by its stream event id, with the reason."""
    record_id = record.event_id or record.sequence_number
    quarantine.put(dynamodb, settings, "events-stream", _text(record_id), record.raw_json(), reason(exc), now_ms)
    result.quarantined.append(record_id)


def _text(value: str) -> str:
    """Text DynamoDB will store, whatever the record held (lone surrogates escaped)."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")
