"""The record the stream handler counts: one event of a stream record, where it sits in its shard
(docs/counting.md, "Packs"), and the items it adds to (`touches`). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chalicelib.core import attributes, timebuckets
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import audit_items, filters, layout
from chalicelib.events import ingest as events_ingest
from chalicelib.events import packs
from chalicelib.events.ingest import Event
from chalicelib.events.stream_records import StreamRecord


@dataclass(frozen=True, eq=False)
class Countable:
    event: Event
    record: StreamRecord
    shard: str  # the position attribute of its shard (`s:<hash>`)
    position: str  # its sequence number as a sortable string
    partition: str | None  # its events-table pk (audit)
    marker: str | None = None  # client-id events: the marker they are claimed by
    buckets: tuple[Bucket, ...] = ()  # its live buckets (expired ones would read as 0)

    def stamp(self, first: str = "", before: str = "") -> str:
        """This record's position as an item stores it for its shard (layout.stamped_position)."""
        return layout.stamped_position(self.position, int(self.record.created_s or 0), first, before)


@dataclass(frozen=True, order=True)
class Touch:
    """One bucket item a countable event adds to: of its counter, or of a filter (`pk`), ordered by pk then bucket."""

    pk: str
    bucket: Bucket

    def key(self) -> dict[str, Any]:
        return layout.bucket_item_key(self.pk, self.bucket)


def countable_from_record(record: StreamRecord, now_ms: int) -> Countable:
    """What the record of one event (stream_records.events_of) counts as, with its buckets live
    at now_ms; ValidationError if its content cannot be counted."""
    if record.error:
        raise ValidationError(record.error)
    if (record.new_image or {}).get("kind") not in packs.KINDS:  # ingest writes only events and packs
        raise ValidationError("the item is neither an event nor a pack")
    position = layout.event_position(record.sequence_number, record.pack_index)
    if position is None:
        raise ValidationError("stream record has no sequence number")
    image = record.new_image or {}
    event = events_ingest.from_item(image)
    partition = image.get("pk")
    shard = layout.shard_attribute(record.shard)
    try:
        if isinstance(partition, str):
            audit_items.shard_item_key(partition, shard)
        marker = attributes.partition_key(layout.marker_key(event.counter, event.id)) if event.id_given else None
        for bucket in timebuckets.buckets_for(event.time_ms):
            layout.bucket_key(event.counter, bucket)
    except ValueError as exc:  # a key DynamoDB would refuse: this record's content
        raise ValidationError(f"no key can be built for it: {exc}") from exc
    live = tuple(live_buckets(event, now_ms))
    return Countable(event, record, shard, position, partition if isinstance(partition, str) else None, marker, live)


def is_event(record: StreamRecord) -> bool:
    """Whether a stream record is an insert (of anything else: set aside by countable_from_record)."""
    return record.event_name == "INSERT"


def countables(record: StreamRecord, now_ms: int) -> list[Countable]:
    """The countable events one stream record carries ([] for a record that is not the insert of
    an event); ValidationError if its content cannot be counted."""
    return [countable_from_record(record, now_ms)] if is_event(record) else []


def touches(countable: Countable, settings: Settings) -> list[Touch]:
    """The items one countable event adds to: the live buckets of its counter and of its filters."""
    event = countable.event
    return [
        Touch(pk, bucket)
        for pk in filters.count_pks(event.counter, event.dimensions, settings.filter_pairs)
        for bucket in countable.buckets
    ]


def live_buckets(event: Event, now_ms: int) -> list[Bucket]:
    """Buckets of the event that have not expired yet; an expired one would read as 0."""
    return [b for b in timebuckets.buckets_for(event.time_ms) if timebuckets.live(b, event.retention_seconds, now_ms)]


def claim_put(settings: Settings, countable: Countable, now_ms: int) -> dict[str, Any]:
    """The PutItem (request fields) by which a record claims its client id's marker (docs/counting.md, "The proof")."""
    now_s, claim = now_ms // 1000, f"{countable.shard}:{countable.position}"
    return {
        "TableName": settings.counts_table,
        "Item": {
            "pk": {"S": countable.marker or ""},
            "sk": {"S": "#"},
            "c": {"S": claim},
            "expires_at": {"N": str(now_s + settings.marker_ttl_seconds)},
        },
        "ConditionExpression": "attribute_not_exists(pk) OR expires_at < :now OR c = :claim",
        "ExpressionAttributeValues": {":now": {"N": str(now_s)}, ":claim": {"S": claim}},
    }
