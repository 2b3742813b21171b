"""`POST /quarantine/replay`: count stream records that were set aside, once they are valid.

A stream record is set aside (`QUARANTINE#events-stream` / <stream event id>, core/quarantine.py)
when its content cannot be counted. After a fix (the code now accepts it, or an operator
corrected the stored copy of the record) replay parses the stored copy again exactly as the
stream handler does (events/stream_records, events/ingest.from_item, counters/stream_apply). A
record that is now valid is counted in ONE TransactWriteItems (core.transactions) that

- deletes its quarantine item, on condition that it still exists: a replay run twice, or two
  runs at once, or a run retried after dying, count it once (the second finds no item, or its
  transaction is cancelled on that condition);
- adds its increments to its buckets with the stream handler's own update (expiry and retention
  as the stream handler sets them: later events only extend a bucket's life), its counter's and
  its filters', except the buckets that took it before DynamoDB refused another of its buckets
  (the set-aside copy lists them, stream_records.HELD_FIELD);
- merges it into its breakdown summaries (summaries.replay_puts: each summary item as read, on
  condition that its version is still the one read; a summary the stream handler rewrote
  meanwhile is read again, up to MAX_SUMMARY_ROUNDS times);
- for an event with a client id, puts its marker as the stream handler does; if the marker is
  there (another copy of the event was counted) the record is only taken off the quarantine. A
  marker claimed by this very record (the stream handler claims before its bucket writes, and
  DynamoDB refused those) is its own: the record is counted. The set-aside copy keeps the shard
  it came through (stream_records.SHARD_FIELD), which the claim names;
- moves one from its partition's `set_aside` to `applied` on the audit item that counted it as
  set aside (its stream shard's item of the partition's quarter hour: counters/audit_keys.py),
  on condition that `set_aside` there is at least 1, so the audit still adds up (no audit item: nothing to move; audit items with nothing
  set aside left: the record is not replayed, and says why).

A record still invalid stays set aside with the new reason. Work is bounded: at most
MAX_REPLAY records a request, one transaction each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from chalicelib.core import attributes, dynamo, inputs, keyspace, quarantine, times, transactions, validation
from chalicelib.core.aws import DynamoDB
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import ValidationError, reason
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated
from chalicelib.counters import audit_keys, dimension_keys, stream_apply, summaries
from chalicelib.counters import keys as counter_keys
from chalicelib.events import packs, stream_records

SOURCE = quarantine.EVENTS_STREAM
MAX_REPLAY = 100
# Times a replay reads its breakdown summaries again after one changed under it (the stream
# handler rewrote it): then the record stays set aside, to be replayed later.
MAX_SUMMARY_ROUNDS = 8
QUARANTINE_PK = quarantine.partition_key(SOURCE)


@dataclass(frozen=True)
class ReplayRequest:
    ids: tuple[str, ...] = ()  # these records; empty: the first `limit` of the source
    limit: int = MAX_REPLAY


@dataclass
class ReplayResult:
    replayed: list[str] = field(default_factory=list)  # counted now
    already_counted: list[str] = field(default_factory=list)  # another copy was counted: taken off
    expired: list[str] = field(default_factory=list)  # every bucket expired: taken off, not counted
    still_bad: list[dict[str, str]] = field(default_factory=list)  # still set aside, with the new reason
    not_found: list[str] = field(default_factory=list)  # not in the quarantine (replayed already?)

    def as_dict(self) -> dict[str, Any]:
        return {
            "replayed": self.replayed,
            "already_counted": self.already_counted,
            "expired": self.expired,
            "still_bad": self.still_bad,
            "not_found": self.not_found,
        }


def parse_body(body: Any) -> ReplayRequest:
    """`{"source": "events-stream", "ids": [...]}` or `{"source": "events-stream", "limit": n}`."""
    if not isinstance(body, dict) or not set(body) <= {"source", "ids", "limit"} or "source" not in body:
        raise ValidationError('the body is {"source": "events-stream", "ids": [...]} or {"source": ..., "limit": n}')
    if body["source"] != SOURCE:
        raise ValidationError(f"source must be {SOURCE}: the only source whose records can be replayed")
    if "ids" in body and "limit" in body:
        raise ValidationError("give ids or a limit, not both")
    if "ids" in body:
        ids = body["ids"]
        if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_REPLAY:
            raise ValidationError(f"ids must be a list of 1 to {MAX_REPLAY} record ids")
        if not all(isinstance(i, str) and 1 <= len(i) <= 1024 for i in ids):
            raise ValidationError("each id is a record id as GET /quarantine lists it")
        return ReplayRequest(ids=tuple(dict.fromkeys(inputs.text(i, "ids") for i in ids)))
    limit = body.get("limit", MAX_REPLAY)
    return ReplayRequest(limit=validation.integer(limit, "limit", 1, MAX_REPLAY))


def replay(
    dynamodb: DynamoDB, settings: Settings, request: ReplayRequest, now_ms: int, sleep: Sleep | None = None
) -> ReplayResult:
    result = ReplayResult()
    for record_id, item in _selected(dynamodb, settings, request):
        if item is None:
            result.not_found.append(record_id)
            continue
        _replay_one(dynamodb, settings, record_id, item, now_ms, sleep, result)
    return result


def _selected(
    dynamodb: DynamoDB, settings: Settings, request: ReplayRequest
) -> list[tuple[str, dict[str, Any] | None]]:
    if request.ids:
        found: list[tuple[str, dict[str, Any] | None]] = []
        for record_id in request.ids:
            with translated("could not read the quarantine"):
                item = dynamodb.get_item(TableName=settings.counts_table, Key=_key(record_id), ConsistentRead=True).get(
                    "Item"
                )
            found.append((record_id, item))
        return found
    query = {
        "TableName": settings.counts_table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": QUARANTINE_PK}},
        "Limit": request.limit,
        "ConsistentRead": True,
    }
    page = next(dynamo.query_pages(dynamodb, query, "could not read the quarantine"))
    return [(attributes.sort_key(i), i) for i in page.get("Items", [])]


def _key(record_id: str) -> dict[str, Any]:
    return {"pk": {"S": QUARANTINE_PK}, "sk": {"S": record_id}}


def _held(item: dict[str, Any]) -> frozenset[str]:
    """The items that took the record before it was set aside (counter_keys.held_id of each):
    the stream handler had written some of its buckets when DynamoDB refused another."""
    try:
        raw = json.loads(attributes.text(item, "record"))
    except ValueError:
        return frozenset()
    held = raw.get(stream_records.HELD_FIELD) if isinstance(raw, dict) else None
    return frozenset(h for h in held if isinstance(h, str)) if isinstance(held, list) else frozenset()


def _parse(item: dict[str, Any], now_ms: int) -> stream_apply.Countable:
    """The stored copy, read as the stream handler reads a record; ValidationError/ValueError if
    it still cannot be counted."""
    try:
        raw = json.loads(attributes.text(item, "record"))
    except ValueError as exc:
        raise ValidationError(
            f"the stored record is not JSON (cut at {quarantine.MAX_RECORD_CHARS} characters?)"
        ) from exc
    shard = raw.get(stream_records.SHARD_FIELD) if isinstance(raw, dict) else None
    record = stream_records.from_lambda_record(raw, shard if isinstance(shard, str) else "")
    if record.event_name != "INSERT" or (record.new_image or {}).get("kind", packs.EVENT_KIND) not in packs.KINDS:
        raise ValidationError("the stored record is not the insert of an event")
    # An event set aside from a pack kept its record narrowed to it (events/stream_records.py).
    carried = stream_records.events_of(record)
    if len(carried) != 1:
        raise ValidationError(f"the stored record carries {len(carried)} events, not one")
    (record,) = carried
    countable = stream_apply.countable_from_record(record)
    partition = (record.new_image or {}).get("pk")
    if not isinstance(partition, str):
        raise ValidationError("the stored record names no events partition")
    audit_keys.shard_item_key(partition, countable.shard)
    return replace(countable, buckets=tuple(stream_apply.live_buckets(countable.event, now_ms)))


def _replay_one(
    dynamodb: DynamoDB,
    settings: Settings,
    record_id: str,
    item: dict[str, Any],
    now_ms: int,
    sleep: Sleep | None,
    result: ReplayResult,
) -> None:
    try:
        countable = _parse(item, now_ms)
    except (ValidationError, ValueError) as exc:
        _still_bad(dynamodb, settings, record_id, reason(exc), now_ms)
        result.still_bad.append({"id": record_id, "reason": reason(exc)})
        return
    partition = str((countable.record.new_image or {})["pk"])
    try:
        tally = _audit_item(dynamodb, settings, countable, partition)
    except _ReplayedAlreadyError:
        why = "its partition's audit item has no set-aside record left to replay: it was replayed already"
        result.still_bad.append({"id": record_id, "reason": why})
        return
    plan = _Plan(dynamodb, settings, record_id, countable, now_ms, tally=tally, held=_held(item))
    try:
        outcome = transactions.write(
            dynamodb,
            [countable],
            plan.build,
            what="replaying a set-aside record",
            duplicates=lambda failed, pending: [c for c in failed if c is not None],
            adapt=plan.adapt,
            sleep=sleep,
        )
    except ConditionFailed:
        result.still_bad.append(
            {"id": record_id, "reason": "its audit item or a summary changed under it: replay it again"}
        )
        return
    if outcome.duplicates:
        result.not_found.append(record_id)  # another replay took it off first
    elif plan.counted_elsewhere:
        result.already_counted.append(record_id)
    elif not countable.buckets:
        result.expired.append(record_id)
    else:
        result.replayed.append(record_id)


class _ReplayedAlreadyError(Exception):
    """The partition's audit items exist and none has a set-aside record left."""


@dataclass(frozen=True)
class _AuditItem:
    """The audit item that counted a record as set aside, and the attribute of each number there."""

    key: dict[str, Any]
    partition: str

    def attribute(self, account: str) -> str:
        return audit_keys.attribute(account, self.partition)


def _audit_item(
    dynamodb: DynamoDB, settings: Settings, countable: stream_apply.Countable, partition: str
) -> _AuditItem | None:
    """Where the stream handler counted the record as set aside: its shard's item of the
    partition's group. None when it does not exist; _ReplayedAlreadyError when it exists with
    nothing set aside left."""
    key = audit_keys.shard_item_key(partition, countable.shard)
    with translated("could not read an audit item"):
        item = dynamodb.get_item(TableName=settings.counts_table, Key=key, ConsistentRead=True).get("Item")
    if audit_keys.member_accounts(item, partition)[audit_keys.SET_ASIDE] >= 1:
        return _AuditItem(key, partition)
    if item is None:
        return None
    raise _ReplayedAlreadyError(partition)


class _Plan:
    """The replay transaction of one record, and how it adapts to what it meets."""

    def __init__(
        self,
        dynamodb: DynamoDB,
        settings: Settings,
        record_id: str,
        countable: stream_apply.Countable,
        now_ms: int,
        tally: _AuditItem | None,
        held: frozenset[str] = frozenset(),
    ) -> None:
        self.dynamodb, self.settings, self.record_id = dynamodb, settings, record_id
        self.countable, self.now_ms = countable, now_ms
        self.tally = tally
        self.held = held  # items that took it before it was set aside: not added to again
        self.counted_elsewhere = False  # the marker was there: another copy was counted
        self.keep_stored: set[tuple[str, str]] = set()
        self.summary_rounds = 0

    def build(self, pending: list[stream_apply.Countable]) -> transactions.Plan[stream_apply.Countable]:
        table, c = self.settings.counts_table, self.countable
        now_s = self.now_ms // 1000
        items: list[dict[str, Any]] = [
            {"Delete": {"TableName": table, "Key": _key(self.record_id), "ConditionExpression": "attribute_exists(pk)"}}
        ]
        owners: list[stream_apply.Countable | None] = [c]
        counting = bool(c.buckets) and not self.counted_elsewhere
        if counting and c.event.id_given:
            marker: dict[str, Any] = {
                "pk": counter_keys.marker_key(c.event.counter, c.event.id)["pk"],
                "sk": {"S": "#"},
                "expires_at": {"N": str(now_s + self.settings.marker_ttl_seconds)},
            }
            condition = "attribute_not_exists(pk) OR expires_at < :now"
            values = {":now": {"N": str(now_s)}}
            if c.record.shard:
                # The stream handler claims the marker before the bucket writes: a record set
                # aside because DynamoDB refused those writes still holds its claim, and was
                # counted nowhere. Its own claim (stream_apply's `<shard>:<position>`) is no
                # other copy's.
                claim = f"{c.shard}:{c.position}"
                marker["c"] = {"S": claim}
                condition += " OR c = :claim"
                values[":claim"] = {"S": claim}
            items.append(
                {
                    "Put": {
                        "TableName": table,
                        "Item": marker,
                        "ConditionExpression": condition,
                        "ExpressionAttributeValues": values,
                    }
                }
            )
            owners.append(None)
        if counting:
            # Its counter's buckets and its filters', then its breakdown summaries.
            for pk in dimension_keys.count_pks(c.event.counter, c.event.dimensions, self.settings.filter_pairs):
                for bucket in c.buckets:
                    key = dimension_keys.bucket_item_key(pk, bucket)
                    if counter_keys.held_id(key) in self.held:
                        continue
                    # Its values go to the slots the item gives their names (read again on each
                    # build: a slot taken meanwhile fails the transaction's condition).
                    slots = stream_apply.stored_slots(self.dynamodb, self.settings, key) if c.event.values else None
                    update = stream_apply.BucketUpdate(stored=slots)
                    update.add(bucket, c.event)
                    keep = attributes.key_of(key) in self.keep_stored
                    # The stream handler's own increment: one rule for a bucket's expiry and retention.
                    items.append({"Update": stream_apply.increment(self.settings, key, bucket, update, keep)})
                    owners.append(None)
            for put in summaries.replay_puts(self.dynamodb, self.settings, c):
                items.append(put)
                owners.append(None)
        if self.tally is not None:
            to = audit_keys.APPLIED if c.buckets else audit_keys.EXPIRED
            items.append(
                {
                    "Update": {
                        "TableName": table,
                        "Key": self.tally.key,
                        "UpdateExpression": "ADD #to :one, #s :minus",
                        "ConditionExpression": "#s >= :one",
                        "ExpressionAttributeNames": {
                            "#to": self.tally.attribute(to),
                            "#s": self.tally.attribute(audit_keys.SET_ASIDE),
                        },
                        "ExpressionAttributeValues": {":one": {"N": "1"}, ":minus": {"N": "-1"}},
                    }
                }
            )
            owners.append(None)
        return transactions.Plan(items, owners)

    def adapt(self, failed: list[dict[str, Any]]) -> bool:
        keys = [next(iter(i.values())).get("Key") or next(iter(i.values())).get("Item") for i in failed]
        pks = [attributes.partition_key(k) for k in keys if k]
        if any(pk.startswith(keyspace.EVENT_MARKER) for pk in pks) and not self.counted_elsewhere:
            self.counted_elsewhere = True
            return True
        buckets = {
            (pk, attributes.sort_key(k))
            for pk, k in zip(pks, keys)
            if pk.startswith((keyspace.COUNTER, keyspace.FILTER))
        }
        new = buckets - self.keep_stored
        self.keep_stored |= new
        if not new and any(pk.startswith(keyspace.SUMMARY) for pk in pks) and self.summary_rounds < MAX_SUMMARY_ROUNDS:
            self.summary_rounds += 1  # a summary was rewritten since it was read: build reads it again
            return True
        return bool(new)


def _still_bad(dynamodb: DynamoDB, settings: Settings, record_id: str, why: str, now_ms: int) -> None:
    """Keep the record set aside, with the reason it fails now."""
    try:
        with translated("could not update a set-aside record"):
            dynamodb.update_item(
                TableName=settings.counts_table,
                Key=_key(record_id),
                UpdateExpression="SET reason = :r, seen_at = :t",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":r": {"S": why}, ":t": {"S": times.iso(now_ms)}},
            )
    except ConditionFailed:
        pass
