"""DynamoDB stream records, deserialized once at the edge into plain Python values, each with the
shard it came through; `events_of` turns a record of a pack into one record per event. Why:
docs/guarantees.md, "Tumbling windows"; docs/counting.md, "Packs"."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from chalicelib.core import attributes
from chalicelib.events import packs

# Added to a set-aside copy of a record for its replay: the shard it was read from, whose claims it
# made, and the items that took it before, which it must not be added to again (docs/counting.md, "Replay").
SHARD_FIELD = "shardId"
HELD_FIELD = "heldBy"


@dataclass(frozen=True)
class StreamRecord:
    event_id: str
    event_name: str  # INSERT, MODIFY or REMOVE
    sequence_number: str
    new_image: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    error: str | None = None  # set when the image could not be deserialized
    shard: str = ""  # the stream shard it was read from ("" when the event did not say)
    created_s: float | None = None  # ApproximateCreationDateTime, epoch seconds
    pack_index: int | None = None  # the event's index in the pack the record carries (None: one event)

    def raw_json(self, held: Sequence[str]) -> str:
        """The record as set aside: Lambda's record plus SHARD_FIELD and HELD_FIELD."""
        copy = {**self.raw, SHARD_FIELD: self.shard} if self.shard else dict(self.raw)
        if held:
            copy[HELD_FIELD] = sorted(held)
        return json.dumps(copy, default=str, sort_keys=True)


def from_lambda_event(event: dict[str, Any]) -> list[StreamRecord]:
    shard = event.get("shardId")
    shard = shard if isinstance(shard, str) else ""
    return [from_lambda_record(record, shard) for record in event.get("Records") or []]


def window_response() -> dict[str, Any]:
    """What a function answers Lambda with a tumbling window (docs/guarantees.md, "Tumbling windows"):
    an empty `state` (counting keeps its own in the counts table), no `batchItemFailures` (a batch fails whole)."""
    return {"state": {}, "batchItemFailures": []}


def from_lambda_record(record: Any, shard: str) -> StreamRecord:
    """One Lambda stream record; whatever is wrong with it is kept in `error`, never raised, so
    one bad record cannot fail its batch."""
    if not isinstance(record, dict):
        return StreamRecord(
            "", "", "", None, raw={"record": record}, error="stream record is not an object", shard=shard
        )
    ddb = record.get("dynamodb")
    ddb = ddb if isinstance(ddb, dict) else {}
    image = ddb.get("NewImage")
    error = None
    new_image = None
    if image is not None:
        try:
            new_image = attributes.deserialized(image)
        except Exception as exc:  # any failure to read an image is this record's alone
            error = f"image cannot be deserialized: {type(exc).__name__}: {exc}"
    created = ddb.get("ApproximateCreationDateTime")
    return StreamRecord(
        event_id=str(record.get("eventID", "")),
        event_name=str(record.get("eventName", "")),
        sequence_number=str(ddb.get("SequenceNumber", "")),
        new_image=new_image,
        raw=record,
        error=error,
        shard=shard,
        created_s=float(created) if isinstance(created, int | float) and not isinstance(created, bool) else None,
    )


def events_of(record: StreamRecord) -> list[StreamRecord]:
    """The records of the events one stream record carries, in pack order (docs/counting.md, "Packs"):
    the record itself when it is no pack; a pack that cannot be read is one record with the error."""
    image = record.new_image
    if record.error or image is None or not packs.is_pack(image):
        return [record]
    try:
        unpacked = packs.unpack(image)
    except packs.PackFormatError as exc:
        return [replace(record, error=f"pack cannot be read: {exc}")]
    return [
        replace(
            record,
            event_id=f"{record.event_id}#{index}",
            new_image=event,
            raw=_narrowed(record.raw, image, index),
            pack_index=index,
        )
        for index, event in unpacked
        if index is not None
    ]


def _narrowed(raw: dict[str, Any], image: dict[str, Any], index: int) -> dict[str, Any]:
    """The raw record with its pack cut down to the event at `index` (DynamoDB JSON)."""
    ddb: dict[str, Any] = raw["dynamodb"]  # where from_lambda_record found the pack's image
    stored = ddb["NewImage"]
    entries = stored.get(packs.EVENTS, {}).get("L", [])
    offset = int(image.get(packs.OFFSET, 0))
    narrowed_image = {
        **stored,
        packs.COUNT: {"N": "1"},
        packs.OFFSET: {"N": str(index)},
        packs.EVENTS: {"L": entries[index - offset : index - offset + 1]},
    }
    return {**raw, "dynamodb": {**ddb, "NewImage": narrowed_image}}
