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
- after the buckets, per quarter hour of ingest (the group of the events partition keys P,
  counters/audit_keys.py), the shard's audit item `AUQ#<quarter>` / `s:<shard hash>` ADDs what
  became of each P's events (applied, set aside, expired, client-id duplicates), proven by the
  shard's position on that item, so `applied` never runs ahead of the buckets and a redelivery
  adds nothing: one write per batch and quarter hour, whatever the number of partitions.

A shard's position on an item is pruned (REMOVE, on a later write that finds it) once its record
is older than `MARKER_TTL_SECONDS` (48 h: beyond the stream's 24-hour retention), when no delivery
can bring a record below it again: items never grow with traffic.

The batch runs through core.batch_processor (StreamCounting says what is the stream's own).
What is poison is decided by validation, and nothing else: a record is set aside
(`QUARANTINE#events-stream`) only for a ValidationError (malformed image, invalid event, a key
that cannot be built) or DynamoDB refusing its data (ValidationException, isolated by the
processor halving the records of the refused update). Any other exception fails the batch, for
Lambda to deliver again: a bug or an outage never sets good records aside.

Where more items per event or more events per record come in: `countables` turns one record
into its countable events, `touches` says which items an event adds to, and `BucketUpdate.add`
what it adds to each.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import Counter
from collections import Counter as Tally
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from chalicelib.core import attributes, batch_processor, decimals, keyspace, timebuckets
from chalicelib.core.aws import DynamoDB
from chalicelib.core.batch_processor import Sent, Write
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError, TallyError, ValidationError
from chalicelib.core.poison import QuarantineSink
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, condition_item, translated
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import audit_keys, catalog, dimension_keys, summaries
from chalicelib.counters import keys as counter_keys
from chalicelib.events import ingest as events_ingest
from chalicelib.events import packs, stream_records
from chalicelib.events.ingest import Event
from chalicelib.events.stream_records import StreamRecord

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
    buckets: tuple[Bucket, ...] = ()  # its live buckets (expired ones would read as 0)


@dataclass(frozen=True)
class Touch:
    """One item a countable event adds to: a bucket of its counter, or of one of its filter
    counters (`pk`: dimension_keys). Which items an event touches is `touches`; what it adds to
    each is `BucketUpdate.add`."""

    pk: str
    bucket: Bucket

    def order(self) -> tuple[str, str, int]:
        return self.pk, self.bucket.resolution, self.bucket.index

    def key(self) -> dict[str, Any]:
        return dimension_keys.bucket_item_key(self.pk, self.bucket)


def countable_from_record(record: StreamRecord) -> Countable:
    """What the record of one event (stream_records.events_of) counts as; ValidationError if
    its content cannot be counted."""
    if record.error:
        raise ValidationError(record.error)
    position = counter_keys.event_position(record.sequence_number, record.pack_index)
    if position is None:
        raise ValidationError("stream record has no sequence number")
    image = record.new_image or {}
    event = events_ingest.from_item(image)
    partition = image.get("pk")
    try:
        if isinstance(partition, str):
            audit_keys.shard_item_key(partition, counter_keys.shard_attribute(record.shard))
        marker = attributes.partition_key(counter_keys.marker_key(event.counter, event.id)) if event.id_given else None
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


def countables(record: StreamRecord, now_ms: int) -> list[Countable]:
    """The countable events one stream record carries ([] for a record that is not the insert of
    an event); ValidationError if its content cannot be counted."""
    if record.event_name != "INSERT" or (record.new_image or {}).get("kind", packs.EVENT_KIND) not in packs.KINDS:
        return []  # not an event: counted nowhere, not even in the audit
    countable = countable_from_record(record)
    return [replace(countable, buckets=tuple(live_buckets(countable.event, now_ms)))]


def touches(countable: Countable, settings: Settings) -> list[Touch]:
    """The items one countable event adds to: the live buckets of its counter and of a filter
    counter per dimension and per pair counted (dimension_keys.subsets)."""
    event = countable.event
    return [
        Touch(pk, bucket)
        for pk in dimension_keys.count_pks(event.counter, event.dimensions, settings.filter_pairs)
        for bucket in countable.buckets
    ]


def live_buckets(event: Event, now_ms: int) -> list[Bucket]:
    """Buckets of the event that have not expired yet; an expired one would read as 0."""
    return [b for b in timebuckets.buckets_for(event.time_ms) if timebuckets.live(b, event.retention_seconds, now_ms)]


def apply_stream_batch(
    dynamodb: DynamoDB, settings: Settings, records: Iterable[StreamRecord], now_ms: int, sleep: Sleep | None = None
) -> BatchResult:
    """Count one Lambda batch (of one shard) exactly once; raises when the batch must be retried."""
    del sleep  # plain writes: the SDK's own retries cover throttling
    records = list(records)
    if any(not r.shard for r in records):
        raise ShardUnknownError("stream event without shardId: the mapping needs TumblingWindowInSeconds")
    ordered = _in_sequence(records)
    # Each event a record carries is the processor's record (stream_records.events_of): a poison
    # event of a pack is set aside alone, and each event has its own position.
    carried = [e for r in ordered for e in (stream_records.events_of(r) if r.event_name == "INSERT" else [r])]
    result = batch_processor.process(StreamCounting(dynamodb, settings, now_ms, ordered != records), carried)
    result.records = len(records)  # stream records delivered; `counted` and the rest are events
    return result


def _in_sequence(records: list[StreamRecord]) -> list[StreamRecord]:
    """A batch's records in stream order per shard (Lambda sends them so; sorting costs nothing
    and keeps every item's updates contiguous). Records without a sequence number keep their place
    at the front, to be set aside."""

    def order(record: StreamRecord) -> tuple[str, str]:
        return record.shard, counter_keys.sequence_position(record.sequence_number) or ""

    return sorted(records, key=order)


Outcome = batch_processor.Outcome[StreamRecord, Countable]


class StreamCounting(batch_processor.Capability[StreamRecord, Countable]):
    """The events stream for the batch processor: a record is an event; the same shard position
    twice is one; a client id is checked by claiming its marker; the writes are one conditional
    UpdateItem per bucket item and shard, whose stored position says what it holds already; the
    audit items follow."""

    def __init__(self, dynamodb: DynamoDB, settings: Settings, now_ms: int, reordered: bool) -> None:
        self.dynamodb, self.settings, self.now_ms, self.reordered = dynamodb, settings, now_ms, reordered
        # The items that took each record in this delivery, by (shard, position): a record set
        # aside after some of its items took it keeps their ids, which its replay leaves out.
        self._held: dict[tuple[str, str], list[str]] = {}
        # The events each day item holds inline: (pk, day, shard, position).
        self._inline: set[tuple[str, int, str, str]] = set()
        self._sink: QuarantineSink[StreamRecord] = QuarantineSink(
            dynamodb, settings, "events-stream", _record_id, self._set_aside_text, now_ms
        )

    @property
    def sink(self) -> QuarantineSink[StreamRecord]:
        return self._sink

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
        c = members[0]
        now_s = self.now_ms // 1000
        claim = f"{c.shard}:{c.position}"
        try:
            with translated("could not claim a client id"):
                self.dynamodb.put_item(
                    TableName=self.settings.counts_table,
                    Item={
                        "pk": {"S": c.marker or ""},
                        "sk": {"S": "#"},
                        "c": {"S": claim},
                        "expires_at": {"N": str(now_s + self.settings.marker_ttl_seconds)},
                    },
                    # Free, expired (lingering until TTL deletes it), or claimed by this very record
                    # on an earlier delivery. A marker with no claim (replay's, for a record that
                    # names no shard) was written with its event counted.
                    ConditionExpression="attribute_not_exists(pk) OR expires_at < :now OR c = :claim",
                    ExpressionAttributeValues={":now": {"N": str(now_s)}, ":claim": {"S": claim}},
                )
        except ConditionFailed:
            return Sent(found=members, calls=1)
        return Sent(applied=members[:1], found=members[1:], calls=1)

    def writes(self, records: list[Countable]) -> list[Write[Countable]]:
        counted = [c for c in records if c.buckets]
        items: dict[tuple[Touch, str], list[Countable]] = {}
        for c in counted:
            for touch in touches(c, self.settings):
                items.setdefault((touch, c.shard), []).append(c)
        ordered = sorted(items.items(), key=lambda kv: (*kv[0][0].order(), kv[0][1]))
        return [
            Write(sorted(members, key=lambda c: c.position), functools.partial(self._apply_item, touch, shard))
            for (touch, shard), members in ordered
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
        held = counter_keys.held_id(touch.key())
        if touch.bucket.resolution == "hour":
            # Its day bucket was written first (writes() orders a pk's day before its hours) and
            # said which events it holds inline: those never go to an hour item.
            day = (touch.pk, timebuckets.day_of_hour(touch.bucket.index), shard)
            inline = [c for c in members if (*day, c.position) in self._inline]
            for c in inline:
                self._held.setdefault((c.shard, c.position), []).append(held)
            members = [c for c in members if (*day, c.position) not in self._inline]
            if not members:
                return Sent()
        sent = apply_item(self.dynamodb, self.settings, touch, shard, members, self.now_ms)
        for c in sent.marks.get(INLINE, ()):
            self._inline.add((touch.pk, touch.bucket.index, shard, c.position))
        for c in (*sent.applied, *sent.found):
            self._held.setdefault((c.shard, c.position), []).append(held)
        return sent

    def _set_aside_text(self, raw: StreamRecord) -> str:
        position = counter_keys.event_position(raw.sequence_number, raw.pack_index)
        shard = counter_keys.shard_attribute(raw.shard) if raw.shard else ""
        return raw.raw_json(self._held.get((shard, position or ""), ()))

    def follow_ups(self, outcome: Outcome) -> list[Write[Countable]]:
        """The breakdown summaries of the records in the buckets (summaries.py), then the audit
        items: what became of each events partition's records of each shard."""
        merged = [
            Write((), functools.partial(self._summary, target, members))
            for target, members in summaries.plan(outcome.settled())
        ]
        if outcome.marks.get(LISTED):
            merged.append(Write((), functools.partial(self._catalog, list(outcome.marks[LISTED]))))
        audits: dict[tuple[str, str], list[Accounted]] = {}
        noted = [(c, audit_keys.DUPLICATES) for c in outcome.checked]
        noted += [(c, audit_keys.APPLIED) for c in outcome.settled()]
        noted += [(c, audit_keys.EXPIRED) for c in outcome.unwritten]
        places = [(c.partition, c.shard, c.position, what) for c, what in noted]
        for poison, parsed in outcome.poison:
            place = _place(poison.raw) if parsed is None else (parsed.partition, parsed.shard, parsed.position)
            if place is not None:
                places.append((*place, audit_keys.SET_ASIDE))
        for partition, shard, position, what in places:
            if partition is not None:
                group = audit_keys.split(partition)[0]
                audits.setdefault((group, shard), []).append(Accounted(position, partition, what))
        return merged + [
            Write((), functools.partial(self._audit, shard, sorted(accounted)))
            for (_, shard), accounted in sorted(audits.items())
        ]

    def _summary(
        self, target: summaries.Target, members: list[tuple[Countable, str]], _: list[Countable]
    ) -> Sent[Countable]:
        return Sent(calls=summaries.write(self.dynamodb, self.settings, target, members, self.now_ms))

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
    return _text(record.event_id or record.sequence_number)


def _place(record: StreamRecord) -> tuple[str | None, str, str] | None:
    """(events partition, shard attribute, position) of a record that could not be parsed, for
    its audit item; None when it names none an audit item can be keyed by."""
    partition = (record.new_image or {}).get("pk") if isinstance(record.new_image, dict) else None
    position = counter_keys.event_position(record.sequence_number, record.pack_index)
    if not isinstance(partition, str) or position is None or not record.shard:
        return None
    shard = counter_keys.shard_attribute(record.shard)
    try:
        audit_keys.shard_item_key(partition, shard)
    except ValueError:
        return None
    return partition, shard, position


# -- buckets ----------------------------------------------------------------------------------

# The mark of the records whose counter's listing a batch writes (follow_ups).
LISTED = "listed"


# The mark of the events a day item holds inline (counter_keys.INLINE_MAX).
INLINE = "inline"


@dataclass
class _Rounds:
    """What the rounds of one item's update have learnt: the item's position for this shard
    (once a cancelled condition has shown it), whether its stored retention is the longer, the
    records it held already (in the batch's range, or beyond it: a skip), of those the ones it
    holds inline, the calls made, and for a day item where this shard's events go (`spill`:
    the stored `x:` value, UNKNOWN until read, None when absent) and how many it holds inline."""

    before: str = ""
    keep_stored: bool = False
    found: list[Countable] = field(default_factory=list)
    beyond: list[Countable] = field(default_factory=list)
    inline: list[Countable] = field(default_factory=list)
    calls: int = 0
    spill: str | None = ""
    inline_count: int = 0
    slots: dict[int, str] | None = None  # the value names the item sums by slot, once read (or a hint)
    taken: dict[int, str] = field(default_factory=dict)  # the slots the last update sent uses

    def marks(self, listed: bool = False, applied: Sequence[Countable] = ()) -> dict[str, Sequence[Countable]]:
        marks: dict[str, Sequence[Countable]] = {"found_applied": self.found, "beyond": self.beyond}
        if listed:
            marks[LISTED] = [*self.found, *applied]
        marks[INLINE] = self.inline
        return marks


UNKNOWN = ""  # _Rounds.spill before the item was read


class _Spilled:
    """Per DynamoDB client, the day items (key and shard) whose `x:` this process has seen past
    NOT_SPILLED: it never goes back (only a prune removes it, once the shard's records are past
    the stream's reach), so the next batch's update goes straight to the hours' mode instead of
    trying inline and being cancelled (a cancelled condition still costs a write). Only a hint:
    the update's condition checks it. Bounded: forgotten whole past MAX entries."""

    MAX = 100_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: weakref.WeakKeyDictionary[DynamoDB, dict[tuple[str, str, str], str]] = weakref.WeakKeyDictionary()

    def get(self, client: DynamoDB, key: dict[str, Any], shard: str) -> str:
        with self._lock:
            return self._seen.get(client, {}).get((*attributes.key_of(key), shard), UNKNOWN)

    def note(self, client: DynamoDB, key: dict[str, Any], shard: str, spill: str | None) -> None:
        if spill in (None, UNKNOWN, counter_keys.NOT_SPILLED):
            return
        with self._lock:
            seen = self._seen.setdefault(client, {})
            if len(seen) >= self.MAX:
                seen.clear()
            seen[(*attributes.key_of(key), shard)] = str(spill)


_spilled = _Spilled()


class _SlotHints:
    """Per DynamoDB client, the value names each bucket item was last seen to sum by slot, so
    the next batch's update names the right slots instead of guessing none and being cancelled.
    Only a hint: the update's condition checks every slot it names. Bounded like _Spilled."""

    MAX = 100_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: weakref.WeakKeyDictionary[DynamoDB, dict[tuple[str, str], dict[int, str]]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, client: DynamoDB, key: dict[str, Any]) -> dict[int, str] | None:
        with self._lock:
            found = self._seen.get(client, {}).get(attributes.key_of(key))
            return dict(found) if found is not None else None

    def put(self, client: DynamoDB, key: dict[str, Any], slots: dict[int, str]) -> None:
        with self._lock:
            seen = self._seen.setdefault(client, {})
            if len(seen) >= self.MAX:
                seen.clear()
            seen[attributes.key_of(key)] = dict(slots)


_slot_hints = _SlotHints()


def _day_mode(rounds: _Rounds, members: list[Countable]) -> str:
    """How a day item takes this shard's next events: `inline` (their minutes in the day item),
    `spill` (SET x: to FROM_START, or to their first position when inline so far: later events
    of the shard go to hours) or `spilled` (x: already says so). Before the item was read, a
    guess its condition checks."""
    spill = rounds.spill
    has_values = any(c.event.values for c in members)
    if spill not in (UNKNOWN, None, counter_keys.NOT_SPILLED):
        return "spilled"
    if has_values or rounds.inline_count + len(members) > counter_keys.INLINE_MAX:
        return "spill"
    return "inline"


def _needs_listing(old: dict[str, Any], request: dict[str, Any], rounds: _Rounds) -> bool:
    """Whether the counter's listing must be written after this update of its day bucket: the
    update created the item, or made it live longer, or some of its records were found applied
    (a redelivery: the delivery that applied them may have died before writing the listing)."""
    if not old or rounds.found:
        return True
    expires = attributes.integer(request["ExpressionAttributeValues"], ":exp")
    return attributes.integer(old, "expires_at", 0) < expires


def apply_item(
    dynamodb: DynamoDB, settings: Settings, touch: Touch, shard: str, members: list[Countable], now_ms: int
) -> Sent[Countable]:
    """Apply the records of one shard to one bucket item: one conditional UpdateItem, re-sent
    without what the item says it already holds. RejectedError when DynamoDB refuses the data
    (the batch processor then halves the records to find the one to blame). A day item marks
    (INLINE) the events it holds inline, which their hour items must not take."""
    members = sorted(members, key=lambda c: c.position)
    key = touch.key()
    day = touch.bucket.resolution == "day"
    rounds = _Rounds(spill=_spilled.get(dynamodb, key, shard) if day else UNKNOWN, slots=_slot_hints.get(dynamodb, key))
    # A counter's own day bucket decides its listing (GET /counters, catalog.py).
    lists = day and touch.pk.startswith(keyspace.COUNTER)
    for _ in range(MAX_ROUNDS):
        if not members:
            return Sent(found=rounds.found, calls=rounds.calls, marks=rounds.marks(listed=lists))
        mode = _day_mode(rounds, members) if day else ""
        request = _bucket_update(settings, key, touch.bucket, shard, members, rounds, mode)
        try:
            rounds.calls += 1
            with translated("could not count a bucket"):
                response = dynamodb.update_item(**request)
        except ConditionFailed as failed:
            members = _not_held(dynamodb, settings, failed, key, shard, members, rounds, mode)
            continue
        if mode == "inline":
            rounds.inline += members
        elif mode == "spill":
            spill = members[0].position if rounds.spill == counter_keys.NOT_SPILLED else counter_keys.FROM_START
            _spilled.note(dynamodb, key, shard, spill)
        elif mode == "spilled":
            _spilled.note(dynamodb, key, shard, rounds.spill)
        old = response.get("Attributes", {})
        if rounds.taken:
            _slot_hints.put(dynamodb, key, {**dimension_keys.slots_of(old), **rounds.taken})
        pruned = _prune(dynamodb, settings, key, old, shard, now_ms)
        marks = rounds.marks(listed=lists and _needs_listing(old, request, rounds), applied=members)
        return Sent(
            applied=members,
            found=rounds.found,
            calls=rounds.calls + (1 if pruned is not None else 0),
            marks=marks,
            details=Counter(positions_pruned=pruned) if pruned else Counter(),
        )
    raise StorageError("a bucket's position kept moving")


def _not_held(
    dynamodb: DynamoDB,
    settings: Settings,
    failed: ConditionFailed,
    key: dict[str, Any],
    shard: str,
    members: list[Countable],
    rounds: _Rounds,
    mode: str,
) -> list[Countable]:
    """After a failed update: the records the item does not hold yet (its cancelled condition
    returned how far this shard got), noting the others in `rounds`."""
    stored = _stored_item(dynamodb, settings, failed, key)
    stamp = stored.stamp(shard)
    applied = [c for c in members if c.position <= stamp.position]
    rounds.found += applied
    # Between the position stored before the last update and that update's first record: that
    # update skipped it, which only a shard read out of order does.
    rounds.beyond += [c for c in applied if stamp.before < c.position < stamp.first]
    spill = stored.spills.get(counter_keys.spill_attribute(shard))
    rounds.inline += [c for c in applied if counter_keys.held_inline(spill, c.position)]
    members = [c for c in members if c.position > stamp.position]
    rounds.before = stamp.position
    longer = stored.retention > max((c.event.retention_seconds for c in members), default=0)
    learnt = bool(mode) and (rounds.spill != spill or rounds.inline_count != stored.inline_count)
    rounds.spill, rounds.inline_count = spill, stored.inline_count
    named = rounds.slots != stored.slots
    rounds.slots = stored.slots
    _slot_hints.put(dynamodb, key, stored.slots)
    if not applied and not learnt and not named and (rounds.keep_stored or not longer):
        raise StorageError("a bucket's condition failed for no reason this code knows") from failed
    rounds.keep_stored = rounds.keep_stored or longer
    return members


@dataclass
class BucketUpdate:
    """What a set of events adds to one bucket item."""

    n: int = 0
    minutes: Tally[int] = field(default_factory=Tally)
    retention: int = 0
    sums: dict[str, Decimal] = field(default_factory=dict)  # attribute name -> amount to ADD
    # The item's value names by slot as known (None: not read: taken as none, which the update's
    # condition checks), the slot of each name this update sums, and the values it leaves unsummed.
    stored: dict[int, str] | None = None
    slots: dict[str, int] = field(default_factory=dict)
    unsummed: int = 0

    inline: Tally[int] = field(default_factory=Tally)  # day items: minute of day -> count

    def add(self, bucket: Bucket, event: Event, inline: bool = False) -> None:
        self.n += 1
        minute = timebuckets.minute_of_hour(event.time_ms)
        if bucket.resolution == "hour":
            self.minutes[minute] += 1
        elif inline:
            self.inline[timebuckets.minute_of(event.time_ms) % timebuckets.DAY_MINUTES] += 1
        self.retention = max(self.retention, event.retention_seconds)
        for name, amount in event.values.items():
            slot = self._slot(name)
            if slot is None:
                self.unsummed += 1
                continue
            attribute = (
                dimension_keys.slot_minute_attribute(minute, slot)
                if bucket.resolution == "hour"
                else dimension_keys.slot_total_attribute(slot)
            )
            self.sums[attribute] = decimals.EXACT.add(self.sums.get(attribute, Decimal(0)), amount)

    def _slot(self, name: str) -> int | None:
        """The slot that sums this value name in the item: its own, else the first free one
        (names take slots in the order of the events), None when every slot is taken."""
        if name in self.slots:
            return self.slots[name]
        known = self.stored or {}
        own = [slot for slot, held in sorted(known.items()) if held == name]
        free = [s for s in range(dimension_keys.MAX_SUM_NAMES) if s not in known and s not in self.slots.values()]
        slot = own[0] if own else free[0] if free else None
        if slot is not None:
            self.slots[name] = slot
        return slot


def _bucket_update(
    settings: Settings,
    key: dict[str, Any],
    bucket: Bucket,
    shard: str,
    members: list[Countable],
    rounds: _Rounds,
    mode: str = "",
) -> dict[str, Any]:
    update = BucketUpdate(stored=rounds.slots)
    for c in members:
        # Inline only a minute its hour still counts (an hour past the event's retention does not).
        live_hour = any(b.resolution == "hour" for b in c.buckets)
        update.add(bucket, c.event, inline=mode == "inline" and live_hour)
    last = members[-1]
    rounds.taken = {slot: name for name, slot in update.slots.items()}
    request = increment(settings, key, bucket, update, rounds.keep_stored)
    names, values = request["ExpressionAttributeNames"], request["ExpressionAttributeValues"]
    names["#p"] = shard
    values[":first"] = {"S": members[0].position}
    values[":pos"] = {
        "S": counter_keys.stamped_position(last.position, _created_s(last.record), members[0].position, rounds.before)
    }
    request["UpdateExpression"] += ", #p = :pos"
    conditions = ["(attribute_not_exists(#p) OR #p < :first)"]
    if request.get("ConditionExpression"):
        conditions.append(request["ConditionExpression"])
    if mode in ("inline", "spill"):
        names["#x"] = counter_keys.spill_attribute(shard)
    if mode == "inline" or (mode == "spill" and rounds.spill == counter_keys.NOT_SPILLED):
        values[":inf"] = {"S": counter_keys.NOT_SPILLED}
    if mode == "inline":
        # Inline while this shard is (or starts) inline and the item has room.
        names["#ic"] = counter_keys.INLINE_COUNT
        values[":room"] = {"N": str(counter_keys.INLINE_MAX - update.n)}
        values[":k"] = {"N": str(update.n)}
        request["UpdateExpression"] = request["UpdateExpression"].replace("ADD ", "ADD #ic :k, ", 1)
        request["UpdateExpression"] += ", #x = :inf"
        conditions.append("(attribute_not_exists(#x) OR #x = :inf)")
        conditions.append("(attribute_not_exists(#ic) OR #ic <= :room)")
    elif mode == "spill" and rounds.spill == counter_keys.NOT_SPILLED:
        request["UpdateExpression"] += ", #x = :first"  # inline before this update, hours from it on
        conditions.append("#x = :inf")
    elif mode == "spilled":
        # Known (or remembered) past NOT_SPILLED; checked, for a remembered value is a hint.
        names["#x"] = counter_keys.spill_attribute(shard)
        conditions.append("(attribute_not_exists(#x) OR #x < :first)")
    elif mode == "spill":
        values[":start"] = {"S": counter_keys.FROM_START}
        request["UpdateExpression"] += ", #x = :start"
        conditions.append("attribute_not_exists(#x)")
    request["ConditionExpression"] = " AND ".join(conditions)
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
    for minute, k in sorted(update.inline.items()):
        names[f"#i{minute}"] = counter_keys.inline_attribute(minute)
        values[f":i{minute}"] = {"N": str(k)}
        adds.append(f"#i{minute} :i{minute}")
    sets: list[str] = []
    for i, (attribute, amount) in enumerate(sorted(update.sums.items())):
        names[f"#v{i}"] = attribute
        values[f":v{i}"] = {"N": str(amount)}
        adds.append(f"#v{i} :v{i}")
    conditions = [] if keep_stored else ["(attribute_not_exists(#r) OR #r <= :r)"]
    conditions += _slot_conditions(update, names, values, adds, sets)
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
    if conditions:
        request["ConditionExpression"] = " AND ".join(conditions)
    return request


def _slot_conditions(
    update: BucketUpdate, names: dict[str, str], values: dict[str, Any], adds: list[str], sets: list[str]
) -> list[str]:
    """The update's value names in their slots: a slot the item is known to give the name, on
    condition that it still does; a free one, SET on condition that it is still free. So a
    wrong guess (an item not read yet, or changed since) fails the condition and is read again,
    and no item ever sums more than MAX_SUM_NAMES names. The values left unsummed are counted."""
    if update.unsummed:
        names["#vx"] = dimension_keys.NOT_SUMMED
        values[":vx"] = {"N": str(update.unsummed)}
        adds.append("#vx :vx")
    conditions = []
    for name, slot in sorted(update.slots.items(), key=lambda kv: kv[1]):
        names[f"#w{slot}"] = dimension_keys.slot_name_attribute(slot)
        values[f":w{slot}"] = {"S": name}
        if (update.stored or {}).get(slot) == name:
            conditions.append(f"#w{slot} = :w{slot}")
        else:
            sets.append(f", #w{slot} = :w{slot}")
            conditions.append(f"attribute_not_exists(#w{slot})")
    return conditions


def stored_slots(dynamodb: DynamoDB, settings: Settings, key: dict[str, Any]) -> dict[int, str]:
    """The value names a bucket item sums by slot, read consistently (for an update sent in a
    transaction, whose cancelled condition returns no item to learn them from)."""
    names = {f"#w{s}": dimension_keys.slot_name_attribute(s) for s in range(dimension_keys.MAX_SUM_NAMES)}
    with translated("could not read a bucket's value names"):
        response = dynamodb.get_item(
            TableName=settings.counts_table,
            Key=key,
            ConsistentRead=True,
            ProjectionExpression=", ".join(names),
            ExpressionAttributeNames=names,
        )
    return dimension_keys.slots_of(response.get("Item", {}))


def _created_s(record: StreamRecord) -> int:
    return int(record.created_s) if record.created_s is not None else 0


@dataclass(frozen=True)
class StoredPositions:
    """A bucket or audit item as read back for its proof: each shard's stamped position (by
    its `s:<hash>` attribute) and the retention it keeps."""

    positions: dict[str, str]
    retention: int
    spills: dict[str, str] = field(default_factory=dict)  # day items: `x:<hash>` -> where its events went
    inline_count: int = 0
    slots: dict[int, str] = field(default_factory=dict)  # the value names it sums, by slot

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> StoredPositions:
        positions = {
            name: str(value["S"])
            for name, value in item.items()
            if counter_keys.is_shard_attribute(name) and isinstance(value, dict) and "S" in value
        }
        spills = {
            name: str(value["S"])
            for name, value in item.items()
            if name.startswith(counter_keys.SPILL_PREFIX) and isinstance(value, dict) and "S" in value
        }
        inline = attributes.integer(item, counter_keys.INLINE_COUNT, 0)
        slots = dimension_keys.slots_of(item)
        return cls(positions, attributes.integer(item, "retention", 0), spills, inline, slots)

    def stamp(self, shard: str) -> counter_keys.Stamp:
        return counter_keys.split_stamped(self.positions.get(shard, ""))


def _stored_item(
    dynamodb: DynamoDB, settings: Settings, failed: ConditionFailed, key: dict[str, Any]
) -> StoredPositions:
    """The positions on the item a cancelled condition found (returned with the failure:
    ReturnValuesOnConditionCheckFailure=ALL_OLD, which moto 5.2.5 supports for UpdateItem too)."""
    found = condition_item(dynamodb, settings.counts_table, key, failed, "could not read an item's positions")
    return StoredPositions.from_item(found or {})


def _prune(
    dynamodb: DynamoDB, settings: Settings, key: dict[str, Any], old: dict[str, Any], own: str, now_ms: int
) -> int | None:
    """Remove the positions of shards no delivery can bring back below (their record is older
    than the stream's retention plus margin): one extra write, once per such shard and item.
    Returns how many were removed, None when there was nothing to remove (no call made)."""
    horizon = now_ms // 1000 - settings.marker_ttl_seconds
    stale = {
        name: value
        for name, value in StoredPositions.from_item(old).positions.items()
        if name != own and (created := counter_keys.split_stamped(value).created_s) is not None and created < horizon
    }
    if not stale:
        return None
    names = {f"#s{i}": name for i, name in enumerate(sorted(stale))}
    values = {f":s{i}": {"S": stale[name]} for i, name in enumerate(sorted(stale))}
    # A day item's `x:` of the shard goes with its position: no delivery can ask about it again.
    spills = {f"#x{i}": counter_keys.spill_attribute(name) for i, name in enumerate(sorted(stale))}
    spills = {n: a for n, a in spills.items() if a in old}
    try:
        with translated("could not prune positions"):
            dynamodb.update_item(
                TableName=settings.counts_table,
                Key=key,
                UpdateExpression="REMOVE " + ", ".join([*names, *spills]),
                ConditionExpression=" AND ".join(f"{n} = :{n[1:]}" for n in names),
                ExpressionAttributeNames={**names, **spills},
                ExpressionAttributeValues=values,
            )
    except ConditionFailed:  # moved on meanwhile: the next write prunes it
        return 0
    return len(stale)


# -- audit ------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Accounted:
    """What became of one event of a stream shard (an audit_keys account), for its audit item."""

    position: str
    partition: str
    account: str


def apply_audit(dynamodb: DynamoDB, settings: Settings, shard: str, accounted: list[Accounted], now_ms: int) -> int:
    """ADD what became of one shard's records of one group of events partitions (its quarter
    hour) to the shard's audit item, once, after their buckets; returns the calls made. The
    item's position of the shard says which records it holds already: an update is sent on
    condition that it is below the first record sent, and when it is not (a redelivery, a
    batch cut differently), again with only the records above it."""
    accounted = sorted(accounted)
    if not accounted:
        return 0
    key = audit_keys.shard_item_key(accounted[0].partition, shard)
    calls = 0
    for _ in range(MAX_ROUNDS):
        if not accounted:
            return calls
        tally = Tally(audit_keys.attribute(a.account, a.partition) for a in accounted)
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
                        ":pos": {"S": counter_keys.stamped_position(accounted[-1].position, now_ms // 1000)},
                        ":exp": {"N": str(now_ms // 1000 + audit_keys.AUDIT_TALLY_TTL_SECONDS)},
                    },
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            return calls
        except ConditionFailed as failed:
            stored = _stored_item(dynamodb, settings, failed, key).stamp(shard)
            remaining = [a for a in accounted if a.position > stored.position]
            if len(remaining) == len(accounted):
                raise StorageError("the audit's condition failed for no reason this code knows") from failed
            accounted = remaining
    raise StorageError("the audit's position kept moving")


def _text(value: str) -> str:
    """Text DynamoDB will store, whatever the record held (lone surrogates escaped)."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")
