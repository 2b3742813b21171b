"""Applying a DynamoDB stream batch to the windowed counters, exactly once, keyed by shard.

Lambda delivers stream records at least once and a handler may die between two writes. What
AWS orders is the stream SHARD: a record appears in exactly one shard, a shard's records carry
increasing sequence numbers, and Lambda reads a shard in order, one batch at a time
(ParallelizationFactor 1), a failed batch again before anything after it (docs/guarantees.md).
So the proof is kept per shard, on the items being counted:

- every bucket item carries, for each shard that wrote to it, how far that shard has been
  applied to it (`s:<shard hash>` = sequence position @ creation time of that record). An
  increment and its proof are ONE conditional UpdateItem: ADD the counts, SET the position, on
  condition that the stored position is below the first record it applies. A cancelled
  condition returns the stored item (ReturnValuesOnConditionCheckFailure=ALL_OLD) and says how
  far that item got; the update is re-sent with only the later records. A plain write, never a
  transaction: no item is written twice for one batch.
- a client-id event (two POSTs of one id store two items, two stream records) is claimed first
  by its marker `EVT#<counter>#<id>`: one PutItem naming the record that claims it (shard hash
  and position). Another record of the same id finds the claim and is a duplicate; the claiming
  record delivered again finds its own claim and goes on to the buckets, whose positions say
  what it already applied.
- after the buckets, per events partition key P, the audit item `AUD#<P>` ADDs what became of
  P's events (applied, set aside, expired, client-id duplicates), proven by the same per-shard
  positions, so `applied` never runs ahead of the buckets and a redelivery adds nothing.

A shard's position on an item is pruned (REMOVE, on a later write that finds it) once its record
is older than `MARKER_TTL_SECONDS` (48 h: beyond the stream's 24-hour retention), when no delivery
can bring a record below it again: items never grow with traffic.

What is poison is decided by validation, and nothing else: a record is set aside
(`QUARANTINE#events-stream`) only for a ValidationError (malformed image, invalid event, a key
that cannot be built) or DynamoDB refusing its data (ValidationException, isolated by splitting
the records of the refused update). Any other exception fails the batch, for Lambda to deliver
again: a bug or an outage never sets good records aside.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import quarantine, timebuckets
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import REJECTED_ERROR_CODES, RejectedError, StorageError, TallyError, ValidationError
from chalicelib.core.errors import reason as failure_reason
from chalicelib.core.settings import Settings
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import audit_keys, catalog, dimension_keys, summaries, topk
from chalicelib.counters import keys as counter_keys
from chalicelib.events import ingest as events_ingest
from chalicelib.events.ingest import Event
from chalicelib.events.stream_records import StreamRecord

CONDITION_FAILED = "ConditionalCheckFailedException"
# An item's stored position can only move the records still to send forward: more rounds than
# this on one item means the stored state is not what this code writes.
MAX_ROUNDS = 8


class ShardUnknownError(TallyError):
    """The stream event does not name its shard: the event source mapping lacks the tumbling
    window that makes Lambda send `shardId`. Counting without it could not be proven, so the
    batch fails (Lambda keeps it; the error and iterator-age alarms fire)."""


@dataclass(frozen=True, eq=False)
class Countable:
    event: Event
    record: StreamRecord
    shard: str  # the position attribute of its shard (`s:<hash>`)
    position: str  # its sequence number as a sortable string
    partition: str | None  # its events-table pk (audit)
    marker: str | None = None  # client-id events: the marker they are claimed by
    buckets: tuple[Bucket, ...] = ()


@dataclass
class _Audit:
    """What became of one events partition's records of one shard in this batch."""

    outcomes: list[tuple[str, str]] = field(default_factory=list)  # (position, outcome)


@dataclass
class _Progress:
    """Per record: newly applied to some item now / found applied (in the batch's range, or
    beyond it: a skip)."""

    applied_now: set[int] = field(default_factory=set)
    found_applied: set[int] = field(default_factory=set)
    beyond: set[int] = field(default_factory=set)


def countable_from_record(record: StreamRecord) -> Countable:
    """What a stream record counts as; ValidationError if its content cannot be counted."""
    if record.error:
        raise ValidationError(record.error)
    position = counter_keys.sequence_position(record.sequence_number)
    if position is None:
        raise ValidationError("stream record has no sequence number")
    image = record.new_image or {}
    event = events_ingest.from_item(image)
    partition = image.get("pk")
    try:
        if isinstance(partition, str):
            counter_keys.audit_key(partition)
        marker = counter_keys.marker_key(event.counter, event.id)["pk"]["S"] if event.id_given else None
        for bucket in timebuckets.buckets_for(event.time_ms):
            counter_keys.bucket_key(event.counter, bucket)
    except ValueError as exc:  # a key DynamoDB would refuse: this record's content
        raise ValidationError(f"no key can be built for it: {exc}") from exc
    return Countable(
        event,
        record,
        counter_keys.shard_attribute(record.shard),
        position,
        partition if isinstance(partition, str) else None,
        marker,
    )


def apply_stream_batch(
    dynamodb: Any, settings: Settings, records: Iterable[StreamRecord], now_ms: int, sleep: Sleep | None = None
) -> BatchResult:
    """Count one Lambda batch (of one shard) exactly once; raises when the batch must be retried."""
    del sleep  # plain writes: the SDK's own retries cover throttling
    records = list(records)
    result = BatchResult(records=len(records))
    if any(not r.shard for r in records):
        raise ShardUnknownError("stream event without shardId: the mapping needs TumblingWindowInSeconds")
    result.details.update(redelivered=0, out_of_sequence=0)  # emitted as metrics even when 0
    audits: dict[tuple[str, str], _Audit] = {}
    pending: list[Countable] = []
    seen: set[tuple[str, str]] = set()
    last: dict[str, str] = {}
    for record in _in_sequence(records, result):
        if record.event_name != "INSERT" or (record.new_image or {}).get("kind", "event") != "event":
            result.details["skipped"] += 1  # not an event: counted nowhere, not even in the audit
            continue
        try:
            countable = countable_from_record(record)
            buckets = live_buckets(countable.event, now_ms)
        except ValidationError as exc:
            _set_aside(dynamodb, settings, result, record, exc, now_ms, audits)
            continue
        if (countable.shard, countable.position) in seen:
            result.duplicates += 1  # the same record twice in one batch
            continue
        seen.add((countable.shard, countable.position))
        if countable.position < last.get(countable.shard, ""):
            result.details["unsorted"] += 1
        last[countable.shard] = max(countable.position, last.get(countable.shard, ""))
        if not buckets:
            result.details["expired"] += 1
            _note(audits, countable, "expired")
            continue
        pending.append(_with_buckets(countable, tuple(buckets)))
    pending = _claim_client_ids(dynamodb, settings, pending, now_ms, result, audits)
    catalog.record(dynamodb, settings, (c.event for c in pending), now_ms)  # GET /counters
    progress = _Progress()
    refused: dict[int, Exception] = {}  # records whose own data DynamoDB refused
    for (pk, bucket, shard), members in _by_item(pending).items():
        _apply_item(dynamodb, settings, pk, bucket, shard, members, now_ms, result, progress, refused)
    summaries.apply(dynamodb, settings, (c for c in pending if id(c) not in refused), now_ms, result)
    for countable in pending:
        if id(countable) in refused:
            continue  # set aside: it is audited as such
        _note(audits, countable, "applied")
    for c in pending:
        key = id(c)
        if key in refused:
            _set_aside(dynamodb, settings, result, c.record, refused[key], now_ms, audits, c)
        elif key in progress.applied_now:
            result.counted += 1
        else:
            result.duplicates += 1
        if key in progress.beyond:
            result.details["out_of_sequence"] += 1  # found applied by a LATER record of its shard
        elif key in progress.found_applied:
            result.details["redelivered"] += 1
    for (partition, shard), audit in sorted(audits.items()):
        _apply_audit(dynamodb, settings, partition, shard, audit, now_ms, result)
    return result


def live_buckets(event: Event, now_ms: int) -> list[Bucket]:
    """Buckets of the event that have not expired yet; an expired one would read as 0."""
    return [b for b in timebuckets.buckets_for(event.time_ms) if timebuckets.live(b, event.retention_seconds, now_ms)]


def _with_buckets(countable: Countable, buckets: tuple[Bucket, ...]) -> Countable:
    return Countable(
        countable.event,
        countable.record,
        countable.shard,
        countable.position,
        countable.partition,
        countable.marker,
        buckets,
    )


def _in_sequence(records: list[StreamRecord], result: BatchResult) -> list[StreamRecord]:
    """A batch's records in stream order per shard (Lambda sends them so; sorting costs nothing
    and keeps every item's updates contiguous). Records without a sequence number keep their place
    at the front, to be set aside."""

    def order(record: StreamRecord) -> tuple[str, str]:
        return record.shard, counter_keys.sequence_position(record.sequence_number) or ""

    ordered = sorted(records, key=order)
    if ordered != records:
        result.details["reordered"] += 1
    return ordered


def _note(audits: dict[tuple[str, str], _Audit], countable: Countable, outcome: str) -> None:
    if countable.partition is not None:
        audits.setdefault((countable.partition, countable.shard), _Audit()).outcomes.append(
            (countable.position, outcome)
        )


# -- client ids -------------------------------------------------------------------------------


def _claim_client_ids(
    dynamodb: Any,
    settings: Settings,
    pending: list[Countable],
    now_ms: int,
    result: BatchResult,
    audits: dict[tuple[str, str], _Audit],
) -> list[Countable]:
    """Claim each client-id event's marker for its record; the records that lose are duplicates."""
    now_s = now_ms // 1000
    kept: list[Countable] = []
    claimed: set[str] = set()
    for c in pending:
        if c.marker is None:
            kept.append(c)
            continue
        if c.marker in claimed:  # a second record of the same id in this batch
            result.duplicates += 1
            _note(audits, c, "duplicates")
            continue
        claim = f"{c.shard}:{c.position}"
        try:
            result.transactions += 1
            dynamodb.put_item(
                TableName=settings.counts_table,
                Item={
                    "pk": {"S": c.marker},
                    "sk": {"S": "#"},
                    "c": {"S": claim},
                    "expires_at": {"N": str(now_s + settings.marker_ttl_seconds)},
                },
                # Free, expired (lingering until TTL deletes it), or claimed by this very record
                # on an earlier delivery. A marker of the former layout has no claim: its event
                # was counted in the transaction that wrote it.
                ConditionExpression="attribute_not_exists(pk) OR expires_at < :now OR c = :claim",
                ExpressionAttributeValues={":now": {"N": str(now_s)}, ":claim": {"S": claim}},
            )
        except ClientError as exc:
            code = _code(exc)
            if code == CONDITION_FAILED:
                claimed.add(c.marker)
                result.duplicates += 1
                _note(audits, c, "duplicates")
                continue
            if code in REJECTED_ERROR_CODES:
                _set_aside(dynamodb, settings, result, c.record, RejectedError(code), now_ms, audits, c)
                continue
            raise StorageError("could not claim a client id") from exc
        claimed.add(c.marker)
        kept.append(c)
    return kept


# -- buckets ----------------------------------------------------------------------------------


def _by_item(pending: list[Countable]) -> dict[tuple[str, Bucket, str], list[Countable]]:
    """Per bucket item (counter or filter partition key, bucket, shard): the records it counts.
    An event with dimensions is counted in a filter counter per subset of them (dimension_keys)."""
    items: dict[tuple[str, Bucket, str], list[Countable]] = {}
    for c in pending:
        for pk in dimension_keys.count_pks(c.event.counter, c.event.dimensions):
            for bucket in c.buckets:
                items.setdefault((pk, bucket, c.shard), []).append(c)
    return dict(sorted(items.items(), key=lambda kv: (kv[0][0], kv[0][1].resolution, kv[0][1].index, kv[0][2])))


def _apply_item(
    dynamodb: Any,
    settings: Settings,
    pk: str,
    bucket: Bucket,
    shard: str,
    members: list[Countable],
    now_ms: int,
    result: BatchResult,
    progress: _Progress,
    refused: dict[int, Exception],
) -> None:
    """Apply the records of one shard to one bucket item: one conditional UpdateItem, re-sent
    without what the item says it already holds."""
    members = sorted(members, key=lambda c: c.position)
    before = ""  # the item's position for this shard, once a cancelled condition has shown it
    keep_stored = False
    key = dimension_keys.bucket_item_key(pk, bucket)
    for _ in range(MAX_ROUNDS):
        members = [c for c in members if id(c) not in refused]
        if not members:
            return
        request = _bucket_update(settings, key, bucket, shard, members, keep_stored, before)
        try:
            result.transactions += 1
            response = dynamodb.update_item(**request)
        except ClientError as exc:
            code = _code(exc)
            if code in REJECTED_ERROR_CODES:
                _isolate(dynamodb, settings, pk, bucket, shard, members, now_ms, result, progress, refused, exc)
                return
            if code != CONDITION_FAILED:
                raise StorageError("could not count a bucket") from exc
            stored = _stored_item(dynamodb, settings, exc, key)
            stamp = counter_keys.split_stamped(stored.get(shard, {}).get("S", ""))
            applied = [c for c in members if c.position <= stamp.position]
            for c in applied:
                progress.found_applied.add(id(c))
                if stamp.before < c.position < stamp.first:
                    # Between the position stored before the last update and that update's first
                    # record: that update skipped it, which only a shard read out of order does.
                    progress.beyond.add(id(c))
            members = [c for c in members if c.position > stamp.position]
            before = stamp.position
            stored_retention = int(stored.get("retention", {}).get("N", "0"))
            longer = stored_retention > max((c.event.retention_seconds for c in members), default=0)
            if not applied and (keep_stored or not longer):
                raise StorageError("a bucket's condition failed for no reason this code knows") from exc
            keep_stored = keep_stored or longer
            continue
        for c in members:
            progress.applied_now.add(id(c))
        _prune(dynamodb, settings, key, response.get("Attributes", {}), shard, now_ms, result)
        return
    raise StorageError("a bucket's position kept moving")


def _isolate(
    dynamodb: Any,
    settings: Settings,
    pk: str,
    bucket: Bucket,
    shard: str,
    members: list[Countable],
    now_ms: int,
    result: BatchResult,
    progress: _Progress,
    refused: dict[int, Exception],
    exc: ClientError,
) -> None:
    """DynamoDB refused an update's data: split its records (in order) until the one to blame is alone."""
    if len(members) == 1:
        refused[id(members[0])] = RejectedError(f"DynamoDB refused its update: {_code(exc)}")
        return
    half = len(members) // 2
    for part in (members[:half], members[half:]):
        _apply_item(dynamodb, settings, pk, bucket, shard, part, now_ms, result, progress, refused)


@dataclass
class BucketUpdate:
    """What a set of events adds to one bucket item."""

    n: int = 0
    minutes: Tally[int] = field(default_factory=Tally)
    retention: int = 0
    sums: dict[str, Decimal] = field(default_factory=dict)  # attribute name -> amount to ADD
    names: dict[str, str] = field(default_factory=dict)  # attribute name -> value name

    def add(self, bucket: Bucket, event: Event) -> None:
        self.n += 1
        minute = timebuckets.minute_of_hour(event.time_ms)
        if bucket.resolution == "hour":
            self.minutes[minute] += 1
        self.retention = max(self.retention, event.retention_seconds)
        for name, amount in event.values.items():
            self.names[dimension_keys.name_attribute(name)] = name
            attribute = (
                dimension_keys.minute_sum_attribute(minute, name)
                if bucket.resolution == "hour"
                else dimension_keys.total_attribute(name)
            )
            self.sums[attribute] = topk.EXACT.add(self.sums.get(attribute, Decimal(0)), amount)


def _bucket_update(
    settings: Settings,
    key: dict[str, Any],
    bucket: Bucket,
    shard: str,
    members: list[Countable],
    keep_stored: bool,
    before: str,
) -> dict[str, Any]:
    update = BucketUpdate()
    for c in members:
        update.add(bucket, c.event)
    last = members[-1]
    request = increment(settings, key, bucket, update, keep_stored)
    request["ExpressionAttributeNames"]["#p"] = shard
    request["ExpressionAttributeValues"][":first"] = {"S": members[0].position}
    request["ExpressionAttributeValues"][":pos"] = {
        "S": counter_keys.stamped_position(last.position, _created_s(last.record), members[0].position, before)
    }
    request["UpdateExpression"] += ", #p = :pos"
    position_ok = "(attribute_not_exists(#p) OR #p < :first)"
    retention_ok = request.get("ConditionExpression")
    request["ConditionExpression"] = f"{position_ok} AND {retention_ok}" if retention_ok else position_ok
    # The old item comes back at no read cost: it shows positions to prune.
    request["ReturnValues"] = "ALL_OLD"
    # A cancelled condition returns the item, which says how far it got.
    request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return request


def increment(
    settings: Settings, key: dict[str, Any], bucket: Bucket, update: BucketUpdate, keep_stored: bool
) -> dict[str, Any]:
    """The UpdateItem request that adds `update` to a bucket item, with the one rule for its
    life: later events can only extend it (a condition keeps the longer retention; with
    `keep_stored` the stored one is known to be longer and is left alone). The stream handler
    adds its shard position to it; the quarantine replay sends it in its transaction."""
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
    sets = []
    for i, (attribute, amount) in enumerate(sorted(update.sums.items())):
        names[f"#v{i}"] = attribute
        values[f":v{i}"] = {"N": str(amount)}
        adds.append(f"#v{i} :v{i}")
    for i, (attribute, value_name) in enumerate(sorted(update.names.items())):
        names[f"#w{i}"] = attribute
        values[f":w{i}"] = {"S": value_name}
        sets.append(f", #w{i} = :w{i}")
    request: dict[str, Any] = {
        "TableName": settings.counts_table,
        "Key": key,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    if keep_stored:
        request["UpdateExpression"] = (
            f"ADD {', '.join(adds)} SET expires_at = if_not_exists(expires_at, :exp), #r = if_not_exists(#r, :r)"
            + "".join(sets)
        )
    else:
        request["UpdateExpression"] = f"ADD {', '.join(adds)} SET expires_at = :exp, #r = :r" + "".join(sets)
        request["ConditionExpression"] = "(attribute_not_exists(#r) OR #r <= :r)"
    return request


def _created_s(record: StreamRecord) -> int:
    return int(record.created_s) if record.created_s is not None else 0


def _stored_item(dynamodb: Any, settings: Settings, exc: ClientError, key: dict[str, Any]) -> dict[str, Any]:
    """The item a cancelled condition found: returned with the error (ReturnValuesOnCondition
    CheckFailure=ALL_OLD, which moto 5.2.5 supports for UpdateItem too); should a response lack
    it, one consistent GetItem reads it."""
    item = exc.response.get("Item")
    if isinstance(item, dict):
        return item
    try:
        response = dynamodb.get_item(TableName=settings.counts_table, Key=key, ConsistentRead=True)
    except ClientError as read_exc:
        raise StorageError("could not read an item's positions") from read_exc
    found = response.get("Item", {})
    return found if isinstance(found, dict) else {}


def _prune(
    dynamodb: Any,
    settings: Settings,
    key: dict[str, Any],
    old: dict[str, Any],
    own: str,
    now_ms: int,
    result: BatchResult,
) -> None:
    """Remove the positions of shards no delivery can bring back below (their record is older
    than the stream's retention plus margin): one extra write, once per such shard and item."""
    horizon = now_ms // 1000 - settings.marker_ttl_seconds
    stale = {}
    for name, value in old.items():
        if not counter_keys.is_shard_attribute(name) or name == own or "S" not in value:
            continue
        created = counter_keys.split_stamped(value["S"]).created_s
        if created is not None and created < horizon:
            stale[name] = value
    if not stale:
        return
    names = {f"#s{i}": name for i, name in enumerate(sorted(stale))}
    values = {f":s{i}": stale[name] for i, name in enumerate(sorted(stale))}
    try:
        result.transactions += 1
        dynamodb.update_item(
            TableName=settings.counts_table,
            Key=key,
            UpdateExpression="REMOVE " + ", ".join(names),
            ConditionExpression=" AND ".join(f"{n} = :{n[1:]}" for n in names),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
        result.details["positions_pruned"] += len(stale)
    except ClientError as exc:
        if _code(exc) != CONDITION_FAILED:  # moved on meanwhile: the next write prunes it
            raise StorageError("could not prune positions") from exc


# -- audit ------------------------------------------------------------------------------------


def _apply_audit(
    dynamodb: Any, settings: Settings, partition: str, shard: str, audit: _Audit, now_ms: int, result: BatchResult
) -> None:
    """ADD what became of one partition's records of one shard, once, after their buckets."""
    outcomes = sorted(audit.outcomes)
    key = audit_keys.tally_key(partition)
    for _ in range(MAX_ROUNDS):
        if not outcomes:
            return
        tally = Tally(outcome for _, outcome in outcomes)
        last_position = outcomes[-1][0]
        request = {
            "TableName": settings.counts_table,
            "Key": key,
            "UpdateExpression": (
                f"ADD {audit_keys.APPLIED} :a, {audit_keys.SET_ASIDE} :s, {audit_keys.EXPIRED} :e, "
                f"{audit_keys.DUPLICATES} :d SET #p = :pos, expires_at = :exp"
            ),
            "ConditionExpression": "attribute_not_exists(#p) OR #p < :first",
            "ExpressionAttributeNames": {"#p": shard},
            "ExpressionAttributeValues": {
                ":a": {"N": str(tally["applied"])},
                ":s": {"N": str(tally["set_aside"])},
                ":e": {"N": str(tally["expired"])},
                ":d": {"N": str(tally["duplicates"])},
                ":first": {"S": outcomes[0][0]},
                ":pos": {"S": counter_keys.stamped_position(last_position, now_ms // 1000)},
                ":exp": {"N": str(now_ms // 1000 + audit_keys.AUDIT_TALLY_TTL_SECONDS)},
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        try:
            result.transactions += 1
            dynamodb.update_item(**request)
            return
        except ClientError as exc:
            if _code(exc) != CONDITION_FAILED:
                raise StorageError("could not write the audit counters") from exc
            stored = counter_keys.split_stamped(_stored_item(dynamodb, settings, exc, key).get(shard, {}).get("S", ""))
            remaining = [o for o in outcomes if o[0] > stored.position]
            if len(remaining) == len(outcomes):
                raise StorageError("the audit's condition failed for no reason this code knows") from exc
            outcomes = remaining
    raise StorageError("the audit's position kept moving")


# -- poison -----------------------------------------------------------------------------------


def _set_aside(
    dynamodb: Any,
    settings: Settings,
    result: BatchResult,
    record: StreamRecord,
    exc: Exception,
    now_ms: int,
    audits: dict[tuple[str, str], _Audit],
    countable: Countable | None = None,
) -> None:
    """Put one record that cannot be counted aside, keyed by its stream event id, with the reason."""
    record_id = record.event_id or record.sequence_number
    quarantine.put(
        dynamodb, settings, "events-stream", _text(record_id), record.raw_json(), failure_reason(exc), now_ms
    )
    result.quarantined.append(record_id)
    partition = (record.new_image or {}).get("pk") if isinstance(record.new_image, dict) else None
    position = counter_keys.sequence_position(record.sequence_number)
    if countable is not None:
        _note(audits, countable, "set_aside")
    elif isinstance(partition, str) and position is not None and record.shard:
        try:
            counter_keys.audit_key(partition)
        except ValueError:
            return  # no audit item can be keyed by it
        audits.setdefault((partition, counter_keys.shard_attribute(record.shard)), _Audit()).outcomes.append(
            (position, "set_aside")
        )


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _text(value: str) -> str:
    """Text DynamoDB will store, whatever the record held (lone surrogates escaped)."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")
