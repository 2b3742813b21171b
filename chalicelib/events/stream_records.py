"""DynamoDB stream records, deserialized once at the edge into plain Python values."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

_DESERIALIZER = TypeDeserializer()


@dataclass(frozen=True)
class StreamRecord:
    event_id: str
    event_name: str  # INSERT, MODIFY or REMOVE
    sequence_number: str
    new_image: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    error: str | None = None  # set when the image could not be deserialized

    def raw_json(self) -> str:
        return json.dumps(self.raw, default=str, sort_keys=True)


def from_lambda_event(event: dict[str, Any]) -> list[StreamRecord]:
    return [from_lambda_record(record) for record in event.get("Records", [])]


def from_lambda_record(record: Any) -> StreamRecord:
    """One Lambda stream record; whatever is wrong with it is kept in `error`, never raised, so
    one bad record cannot fail its batch."""
    if not isinstance(record, dict):
        return StreamRecord("", "", "", None, raw={"record": record}, error="stream record is not an object")
    ddb = record.get("dynamodb")
    ddb = ddb if isinstance(ddb, dict) else {}
    image = ddb.get("NewImage")
    error = None
    new_image = None
    if image is not None:
        try:
            new_image = {k: _DESERIALIZER.deserialize(v) for k, v in image.items()}
        except Exception as exc:  # any failure to read an image is this record's alone
            error = f"image cannot be deserialized: {type(exc).__name__}: {exc}"
    return StreamRecord(
        event_id=str(record.get("eventID", "")),
        event_name=str(record.get("eventName", "")),
        sequence_number=str(ddb.get("SequenceNumber", "")),
        new_image=new_image,
        raw=record,
        error=error,
    )
