"""`POST /quarantine/replay`: count stream records that were set aside, once they are valid, in one
TransactWriteItems. What it holds, and why that counts it once: docs/counting.md, "Replay"."""

from __future__ import annotations

import json
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from typing import Any

from chalicelib.core import attributes, dynamo, inputs, keyspace, quarantine, times, transactions, validation
from chalicelib.core.aws import DynamoDB
from chalicelib.core.errors import ValidationError, reason
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated
from chalicelib.counters import audit_items, bucket_writes, layout, summary_writes
from chalicelib.counters.countable import Countable, claim_put, countable_from_record, is_event, touches
from chalicelib.events import stream_records

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
        return asdict(self)


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
    return ReplayRequest(limit=validation.integer(body.get("limit", MAX_REPLAY), "limit", 1, MAX_REPLAY))


def replay(dynamodb: DynamoDB, settings: Settings, request: ReplayRequest, now_ms: int) -> ReplayResult:
    result = ReplayResult()
    for record_id, item in _selected(dynamodb, settings, request):
        if item is None:
            result.not_found.append(record_id)
            continue
        _replay_one(dynamodb, settings, record_id, item, now_ms, result)
    return result


def _selected(
    dynamodb: DynamoDB, settings: Settings, request: ReplayRequest
) -> list[tuple[str, dict[str, Any] | None]]:
    if request.ids:
        return [
            (i, dynamo.get_item(dynamodb, settings.counts_table, _key(i), "could not read the quarantine"))
            for i in request.ids
        ]
    query = dynamo.query_request(settings.counts_table, QUARANTINE_PK, limit=request.limit, consistent=True)
    found = dynamo.query_items(dynamodb, query, "could not read the quarantine", most=request.limit)
    return [(attributes.sort_key(i), i) for i in found]


def _key(record_id: str) -> dict[str, Any]:
    return {"pk": {"S": QUARANTINE_PK}, "sk": {"S": record_id}}


def _parse(item: dict[str, Any], now_ms: int) -> tuple[Countable, frozenset[str]]:
    """The stored copy, read as the stream handler reads a record, and the items that took it before it was
    set aside (layout.held_id; docs/counting.md, "Replay"); ValidationError/ValueError if it cannot be counted."""
    try:
        raw = json.loads(attributes.text(item, "record"))
    except ValueError as exc:
        raise ValidationError(
            f"the stored record is not JSON (cut at {quarantine.MAX_RECORD_CHARS} characters?)"
        ) from exc
    shard = raw.get(stream_records.SHARD_FIELD) if isinstance(raw, dict) else None
    if not isinstance(shard, str) or not shard:
        raise ValidationError("the stored record names no stream shard")
    record = stream_records.from_lambda_record(raw, shard)
    if not is_event(record):
        raise ValidationError("the stored record is not the insert of an event")
    # An event set aside from a pack kept its record narrowed to it (events/stream_records.py).
    carried = stream_records.events_of(record)
    if len(carried) != 1:
        raise ValidationError(f"the stored record carries {len(carried)} events, not one")
    found = countable_from_record(carried[0], now_ms)
    if found.partition is None:
        raise ValidationError("the stored record names no events partition")
    held = raw.get(stream_records.HELD_FIELD)
    return found, frozenset(h for h in held if isinstance(h, str)) if isinstance(held, list) else frozenset()


def _replay_one(
    dynamodb: DynamoDB, settings: Settings, record_id: str, item: dict[str, Any], now_ms: int, result: ReplayResult
) -> None:
    try:
        countable, held = _parse(item, now_ms)
    except (ValidationError, ValueError) as exc:
        _still_bad(dynamodb, settings, record_id, reason(exc), now_ms)
        result.still_bad.append({"id": record_id, "reason": reason(exc)})
        return
    # The shard's audit item that counted the record as set aside (none: nothing to move there).
    partition = str(countable.partition)
    tally = audit_items.shard_item_key(partition, countable.shard)
    audit = dynamo.get_item(dynamodb, settings.counts_table, tally, "could not read an audit item")
    if audit is not None and audit_items.member_accounts(audit, partition)[audit_items.SET_ASIDE] < 1:
        why = "its partition's audit item has no set-aside record left to replay: it was replayed already"
        result.still_bad.append({"id": record_id, "reason": why})
        return
    plan = _Plan(dynamodb, settings, record_id, countable, now_ms, None if audit is None else tally, held)
    try:
        written = transactions.write(dynamodb, plan.build, what="replaying a set-aside record", adapt=plan.adapt)
    except ConditionFailed:
        why = "its audit item or a summary changed under it: replay it again"
        result.still_bad.append({"id": record_id, "reason": why})
        return
    if not written:
        result.not_found.append(record_id)  # another replay took it off first
    elif plan.counted_elsewhere:
        result.already_counted.append(record_id)
    elif not countable.buckets:
        result.expired.append(record_id)
    else:
        result.replayed.append(record_id)


@dataclass
class _Plan:
    """The replay transaction of one record, and how it adapts to what it meets."""

    dynamodb: DynamoDB
    settings: Settings
    record_id: str
    countable: Countable
    now_ms: int
    tally: dict[str, Any] | None  # the key of the audit item that counted it as set aside
    held: frozenset[str] = frozenset()  # items that took it before it was set aside: not added to again
    counted_elsewhere: bool = False  # the marker was there: another copy was counted
    keep_stored: set[tuple[str, str]] = field(default_factory=set)
    summary_rounds: int = 0

    def build(self) -> transactions.Plan:
        table, c = self.settings.counts_table, self.countable
        items: list[dict[str, Any]] = [
            {"Delete": {"TableName": table, "Key": _key(self.record_id), "ConditionExpression": "attribute_exists(pk)"}}
        ]
        if c.buckets and not self.counted_elsewhere:
            if c.event.id_given:
                items.append({"Put": claim_put(self.settings, c, self.now_ms)})
            # Its counter's buckets and its filters', then its breakdown summaries.
            for touch in touches(c, self.settings):
                key = touch.key()
                if layout.held_id(key) in self.held:
                    continue
                # Its values go to the slots the item gives their names (read again on each
                # build: a slot taken meanwhile fails the transaction's condition).
                slots = bucket_writes.stored_slots(self.dynamodb, self.settings, key) if c.event.values else None
                update = bucket_writes.BucketUpdate(stored=slots)
                update.add(touch.bucket, c.event)
                keep = attributes.key_of(key) in self.keep_stored
                # The stream handler's own increment: one rule for a bucket's expiry and retention.
                items.append({"Update": bucket_writes.increment(self.settings, key, touch.bucket, update, keep)})
            items += summary_writes.replay_puts(self.dynamodb, self.settings, c)
        if self.tally is not None:
            to = audit_items.APPLIED if c.buckets else audit_items.EXPIRED
            names = {"#to": to, "#s": audit_items.SET_ASIDE}
            move = {
                "TableName": table,
                "Key": self.tally,
                "UpdateExpression": "ADD #to :one, #s :minus",
                "ConditionExpression": "#s >= :one",
                "ExpressionAttributeNames": {p: audit_items.attribute(a, str(c.partition)) for p, a in names.items()},
                "ExpressionAttributeValues": {":one": {"N": "1"}, ":minus": {"N": "-1"}},
            }
            items.append({"Update": move})
        # The record's own Delete failing means another replay took it off first.
        return transactions.Plan(items, applied_if=0)

    def adapt(self, failed: list[dict[str, Any]]) -> bool:
        keys = [attributes.key_of(write.get("Key") or write["Item"]) for i in failed for write in i.values()]
        if any(pk.startswith(keyspace.EVENT_MARKER) for pk, _ in keys) and not self.counted_elsewhere:
            self.counted_elsewhere = True
            return True
        new = {key for key in keys if key[0].startswith((keyspace.COUNTER, keyspace.FILTER))} - self.keep_stored
        self.keep_stored |= new
        rewritten = any(pk.startswith(keyspace.SUMMARY) for pk, _ in keys)
        if not new and rewritten and self.summary_rounds < MAX_SUMMARY_ROUNDS:
            self.summary_rounds += 1  # a summary was rewritten since it was read: build reads it again
            return True
        return bool(new)


def _still_bad(dynamodb: DynamoDB, settings: Settings, record_id: str, why: str, now_ms: int) -> None:
    """Keep the record set aside, with the reason it fails now."""
    with suppress(ConditionFailed), translated("could not update a set-aside record"):  # replayed meanwhile
        dynamodb.update_item(
            TableName=settings.counts_table,
            Key=_key(record_id),
            UpdateExpression="SET reason = :r, seen_at = :t",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":r": {"S": why}, ":t": {"S": times.iso(now_ms)}},
        )
