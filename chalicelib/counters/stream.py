"""The events-stream handler: a Lambda batch of one shard counted exactly once, through
core.batch_processor. What is set aside and why: docs/counting.md, "Records that cannot be counted";
why the whole is exact: "The proof"."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass

from chalicelib.core import batch_processor, timebuckets
from chalicelib.core.aws import DynamoDB
from chalicelib.core.batch_processor import Sent, Write
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError, TallyError, storable
from chalicelib.core.poison import QuarantineSink
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated
from chalicelib.counters import audit_items, bucket_writes, catalog, layout, summary_writes
from chalicelib.counters.bucket_writes import INLINE, LISTED, MAX_ROUNDS
from chalicelib.counters.countable import Countable, Touch, claim_put, countables, is_event, touches
from chalicelib.events import stream_records
from chalicelib.events.stream_records import StreamRecord


class ShardUnknownError(TallyError):
    """The stream event names no shard: counting could not be proven (docs/counting.md, "The proof")."""


def apply_stream_batch(
    dynamodb: DynamoDB, settings: Settings, records: Iterable[StreamRecord], now_ms: int, sleep: Sleep | None = None
) -> BatchResult:
    """Count one Lambda batch (of one shard) exactly once; raises when the batch must be retried."""
    del sleep  # plain writes: the SDK's own retries cover throttling
    records = list(records)
    if any(not r.shard for r in records):
        raise ShardUnknownError("stream event without shardId: the mapping needs TumblingWindowInSeconds")
    # In stream order per shard (as Lambda sends them; sorting keeps each item's updates contiguous);
    # records without a sequence number first, to be set aside.
    ordered = sorted(records, key=lambda r: (r.shard, layout.sequence_position(r.sequence_number) or ""))
    # Each event a record carries is the processor's record (stream_records.events_of): a poison
    # event of a pack is set aside alone, and each event has its own position.
    carried = [e for r in ordered for e in (stream_records.events_of(r) if is_event(r) else [r])]
    result = batch_processor.process(StreamCounting(dynamodb, settings, now_ms, ordered != records), carried)
    result.records = len(records)  # stream records delivered; `counted` and the rest are events
    return result


Outcome = batch_processor.Outcome[StreamRecord, Countable]


class StreamCounting(batch_processor.Capability[StreamRecord, Countable]):
    """The events stream for the batch processor: a record is an event, known by its shard
    position; a client id is claimed; the writes are the bucket writes; then the follow-ups."""

    def __init__(self, dynamodb: DynamoDB, settings: Settings, now_ms: int, reordered: bool) -> None:
        self.dynamodb, self.settings, self.now_ms, self.reordered = dynamodb, settings, now_ms, reordered
        # The items that took each record in this delivery, by (shard, position): a record set
        # aside after some of its items took it keeps their ids, which its replay leaves out.
        self._held: dict[tuple[str, str], list[str]] = {}
        # The events each day item holds inline: (pk, day, shard, position).
        self._inline: set[tuple[str, int, str, str]] = set()

    @functools.cached_property
    def sink(self) -> QuarantineSink[StreamRecord]:
        return QuarantineSink(
            self.dynamodb, self.settings, "events-stream", _record_id, self._set_aside_text, self.now_ms
        )

    def parse(self, raw: StreamRecord) -> list[Countable]:
        return countables(raw, self.now_ms)

    def key(self, record: Countable) -> tuple[str, str]:
        return record.shard, record.position

    def checks(self, records: list[Countable]) -> list[Write[Countable]]:
        """One claim per client id among the events still to count (their buckets live)."""
        by_marker: dict[str, list[Countable]] = {}
        for c in records:
            if c.marker is not None and c.buckets:
                by_marker.setdefault(c.marker, []).append(c)
        return [Write(members, self._claim) for members in by_marker.values()]

    def _claim(self, members: list[Countable]) -> Sent[Countable]:
        """Claim a client id's marker for the first of its records; the others are duplicates."""
        with suppress(ConditionFailed), translated("could not claim a client id"):
            self.dynamodb.put_item(**claim_put(self.settings, members[0], self.now_ms))
            return Sent(applied=members[:1], found=members[1:], calls=1)
        return Sent(found=members, calls=1)

    def writes(self, records: list[Countable]) -> list[Write[Countable]]:
        items: dict[tuple[Touch, str], list[Countable]] = {}
        for c in records:
            for touch in touches(c, self.settings):  # none for an event whose buckets all expired
                items.setdefault((touch, c.shard), []).append(c)
        return [
            Write(sorted(members, key=lambda c: c.position), functools.partial(self._apply_item, touch, shard))
            for (touch, shard), members in sorted(items.items(), key=lambda kv: kv[0])
        ]

    def _catalog(self, listed: list[Countable], _: list[Countable]) -> Sent[Countable]:
        """GET /counters: the counters whose day bucket this batch created or made live longer."""
        expiry: dict[str, int] = {}
        for c in listed:
            day = max(c.buckets, key=lambda b: b.end_ms)
            expires = timebuckets.expires_at_s(day, c.event.retention_seconds)
            expiry[c.event.counter] = max(expiry.get(c.event.counter, 0), expires)
        return Sent(calls=catalog.list_counters(self.dynamodb, self.settings, expiry, self.now_ms))

    def _apply_item(self, touch: Touch, shard: str, members: list[Countable]) -> Sent[Countable]:
        held, inline = layout.held_id(touch.key()), list[Countable]()
        if touch.bucket.resolution == "hour":
            # Its day bucket was written first (writes() orders a pk's day before its hours) and
            # said which events it holds inline: those never go to an hour item.
            day = (touch.pk, timebuckets.day_of_hour(touch.bucket.index), shard)
            inline = [c for c in members if (*day, c.position) in self._inline]
            members = [c for c in members if (*day, c.position) not in self._inline]
        sent = Sent[Countable]()
        if members:
            sent = bucket_writes.apply_item(self.dynamodb, self.settings, touch, shard, members, self.now_ms)
        for c in sent.marks.get(INLINE, ()):
            self._inline.add((touch.pk, touch.bucket.index, shard, c.position))
        for c in (*inline, *sent.applied, *sent.found):
            self._held.setdefault((c.shard, c.position), []).append(held)
        return sent

    def _set_aside_text(self, raw: StreamRecord) -> str:
        position = layout.event_position(raw.sequence_number, raw.pack_index)
        shard = layout.shard_attribute(raw.shard) if raw.shard else ""
        return raw.raw_json(self._held.get((shard, position or ""), ()))

    def follow_ups(self, outcome: Outcome) -> list[Write[Countable]]:
        """The breakdown summaries of the records in the buckets (summary_writes.py), then the audit
        items: what became of each events partition's records of each shard."""
        merged = [
            Write((), functools.partial(self._summary, target, members))
            for target, members in summary_writes.plan(outcome.settled())
        ]
        if outcome.marks.get(LISTED):
            merged.append(Write((), functools.partial(self._catalog, list(outcome.marks[LISTED]))))
        audits: dict[tuple[str, str], list[Accounted]] = {}
        noted = [(c, audit_items.DUPLICATES) for c in outcome.checked]
        noted += [(c, audit_items.APPLIED) for c in outcome.settled()]
        noted += [(c, audit_items.EXPIRED) for c in outcome.unwritten]
        places = [(c.partition, c.shard, c.position, what) for c, what in noted]
        for poison, parsed in outcome.poison:
            place = _place(poison.raw) if parsed is None else (parsed.partition, parsed.shard, parsed.position)
            if place is not None:
                places.append((*place, audit_items.SET_ASIDE))
        for partition, shard, position, what in places:
            if partition is not None:
                group = audit_items.split(partition)[0]
                audits.setdefault((group, shard), []).append(Accounted(position, partition, what))
        return merged + [
            Write((), functools.partial(self._audit, shard, sorted(accounted)))
            for (_, shard), accounted in sorted(audits.items())
        ]

    def _summary(
        self, target: summary_writes.Target, members: list[tuple[Countable, str]], _: list[Countable]
    ) -> Sent[Countable]:
        return Sent(calls=summary_writes.write(self.dynamodb, self.settings, target, members, self.now_ms))

    def _audit(self, shard: str, accounted: list[Accounted], _: list[Countable]) -> Sent[Countable]:
        return Sent(calls=apply_audit(self.dynamodb, self.settings, shard, accounted, self.now_ms))

    def summarize(self, outcome: Outcome) -> Counter[str]:
        beyond = {id(c) for c in outcome.marks.get("beyond", [])}
        found = {id(c) for c in outcome.marks.get("found_applied", [])}
        # emitted as metrics even when 0
        details = Counter(redelivered=len(found - beyond), out_of_sequence=len(beyond))
        if outcome.unwritten:
            details["expired"] = len(outcome.unwritten)
        if self.reordered:
            details["reordered"] = 1
        return details


def _record_id(record: StreamRecord) -> str:
    """The record's id as text DynamoDB will store, whatever the record held (lone surrogates escaped)."""
    return storable(record.event_id or record.sequence_number)


def _place(record: StreamRecord) -> tuple[str | None, str, str] | None:
    """(events partition, shard attribute, position) of a record that could not be parsed, for
    its audit item; None when it names none an audit item can be keyed by."""
    partition = (record.new_image or {}).get("pk") if isinstance(record.new_image, dict) else None
    position = layout.event_position(record.sequence_number, record.pack_index)
    if not isinstance(partition, str) or position is None or not record.shard:
        return None
    shard = layout.shard_attribute(record.shard)
    with suppress(ValueError):  # a key DynamoDB would refuse: no audit item
        audit_items.shard_item_key(partition, shard)
        return partition, shard, position
    return None


# -- audit ------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Accounted:
    """What became of one event of a stream shard (an audit_items account), for its audit item."""

    position: str
    partition: str
    account: str


def apply_audit(dynamodb: DynamoDB, settings: Settings, shard: str, accounted: list[Accounted], now_ms: int) -> int:
    """ADD what became of one shard's records of one quarter hour (sorted) to its audit item, once; the calls made."""
    calls = 0
    for _ in range(MAX_ROUNDS):
        if not accounted:
            return calls
        key = audit_items.shard_item_key(accounted[0].partition, shard)  # one group: one item
        tally = Counter(audit_items.attribute(a.account, a.partition) for a in accounted)
        names = {"#p": shard, **{f"#a{i}": name for i, name in enumerate(sorted(tally))}}
        values = {f":a{i}": {"N": str(tally[name])} for i, name in enumerate(sorted(tally))}
        adds = ", ".join(f"#a{i} :a{i}" for i in range(len(tally)))
        try:
            calls += 1
            with translated("could not write the audit counters"):
                dynamodb.update_item(
                    TableName=settings.counts_table,
                    Key=key,
                    UpdateExpression=f"ADD {adds} SET #p = :pos, expires_at = :exp",
                    ConditionExpression="attribute_not_exists(#p) OR #p < :first",
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues={
                        **values,
                        ":first": {"S": accounted[0].position},
                        ":pos": {"S": layout.stamped_position(accounted[-1].position, now_ms // 1000)},
                        ":exp": {"N": str(now_ms // 1000 + audit_items.AUDIT_TALLY_TTL_SECONDS)},
                    },
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            return calls
        except ConditionFailed as failed:
            stored = bucket_writes.stored_item(dynamodb, settings, failed, key).stamp(shard)
            remaining = [a for a in accounted if a.position > stored.position]
            if len(remaining) == len(accounted):
                raise StorageError("the audit's condition failed for no reason this code knows") from failed
            accounted = remaining
    raise StorageError("the audit's position kept moving")
