"""Events in: the POST /events body parsed and validated, the events-table keys and the batch write. The layout
and why: docs/design.md, "Windowed counts"; docs/counting.md, "Packs"."""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeSerializer

from chalicelib.core import attributes, inputs, item_sizes, retry, times, validation
from chalicelib.core.aws import DynamoDB
from chalicelib.core.errors import PartialWriteError, RejectedError, StorageError, ValidationError
from chalicelib.core.settings import Settings
from chalicelib.events import dimensions as event_dimensions
from chalicelib.events import packs

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import WriteRequestTypeDef

MAX_BATCH = 25
STORE_ATTEMPTS = 6
ID_MAX_CHARS = 128
MIN_RETENTION_SECONDS = 60
MAX_RETENTION_SECONDS = 10 * 365 * 86400
MAX_ATTRIBUTES_BYTES = 16_384
EVENT_FIELDS = {"counter", "id", "time", "retention", "attributes", "dimensions", "values"}
_SERIALIZER = TypeSerializer()


@dataclass(frozen=True)
class Event:
    counter: str
    id: str
    time_ms: int
    retention_seconds: int
    attributes: dict[str, Any] = field(default_factory=dict)
    id_given: bool = True  # False when Tally generated the id
    dimensions: dict[str, str] = field(default_factory=dict)  # events/dimensions.py
    values: dict[str, Decimal] = field(default_factory=dict)


def parse_body(body: Any, now_ms: int, settings: Settings) -> list[Event]:
    """One event or {"events": [...]}; the whole request is rejected if any event is bad."""
    if not isinstance(body, dict):
        raise ValidationError('the body must be a JSON object: one event or {"events": [...]}')
    if "events" in body:
        raw = body["events"]
        if set(body) != {"events"}:
            raise ValidationError('a batch body holds only "events"')
        if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_BATCH:
            raise ValidationError(f"events must be a list of 1 to {MAX_BATCH} events")
        return [_parse_event(item, now_ms, settings, f"events[{i}]") for i, item in enumerate(raw)]
    return [_parse_event(body, now_ms, settings, "event")]


def _parse_event(raw: Any, now_ms: int, settings: Settings, where: str) -> Event:
    if not isinstance(raw, dict):
        raise ValidationError(f"{where} must be a JSON object")
    validation.known_fields(raw, EVENT_FIELDS, where)
    counter = validation.name(raw.get("counter"), f"{where}.counter")
    id_given = raw.get("id") is not None
    event_id = validation.text(raw["id"], f"{where}.id", ID_MAX_CHARS) if id_given else uuid.uuid4().hex
    t_ms = now_ms if raw.get("time") is None else times.parse(raw["time"], f"{where}.time")
    times.not_ahead(t_ms, now_ms, settings.max_future_skew_seconds, f"{where}.time")
    retention = raw.get("retention", settings.default_retention_seconds)
    retention = validation.integer(retention, f"{where}.retention", MIN_RETENTION_SECONDS, MAX_RETENTION_SECONDS)
    dims = event_dimensions.dimensions(raw.get("dimensions"), f"{where}.dimensions")
    sums = event_dimensions.values(raw.get("values"), f"{where}.values")
    attributes = raw.get("attributes", {})
    if not isinstance(attributes, dict):
        raise ValidationError(f"{where}.attributes must be a JSON object")
    inputs.check_tree(attributes, f"{where}.attributes", inputs.MAX_STORED_DEPTH)
    if _has_empty_name(attributes):
        # DynamoDB refuses it, moto stores it: docs/local-stack.md, "empty attribute names".
        raise ValidationError(f"{where}.attributes holds an empty name: every key needs a character")
    # Measured before anything is converted (the whole body is already capped in size).
    size = len(json.dumps(attributes, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8"))
    if size > MAX_ATTRIBUTES_BYTES:
        raise ValidationError(f"{where}.attributes is larger than {MAX_ATTRIBUTES_BYTES} bytes")
    attributes = _to_dynamodb_numbers(attributes)
    try:
        _SERIALIZER.serialize(attributes)
    except (TypeError, ValueError, ArithmeticError) as exc:  # decimal's signals are ArithmeticErrors
        raise ValidationError(f"{where}.attributes cannot be stored: {exc!r}") from exc
    return Event(counter, event_id, t_ms, retention, attributes, id_given, dims, sums)


def _has_empty_name(value: Any) -> bool:
    """Whether any object in `value` (at most MAX_STORED_DEPTH deep: check_tree) has the key ""."""
    if isinstance(value, dict):
        return "" in value or any(_has_empty_name(child) for child in value.values())
    return isinstance(value, list) and any(_has_empty_name(child) for child in value)


def _to_dynamodb_numbers(value: Any) -> Any:
    """Every number (checked storable by inputs.check_tree) in its stored form, inputs.canonical (a
    float as its shortest decimal). Why: docs/guarantees.md, "DynamoDB numbers"."""
    if isinstance(value, float):
        return inputs.canonical(Decimal(repr(value)))
    if isinstance(value, Decimal) or (isinstance(value, int) and not isinstance(value, bool)):
        return inputs.canonical(value)
    if isinstance(value, dict):
        return {k: _to_dynamodb_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_dynamodb_numbers(v) for v in value]
    return value


def partition_key(ingest_ms: int, shard: int) -> str:
    return f"{times.quarter_hour(ingest_ms)}#{shard}"


def sort_key(ingest_ms: int, suffix: str) -> str:
    return f"{times.iso(ingest_ms)}#{suffix}"


def from_item(item: dict[str, Any]) -> Event:
    """The event an events-table item (deserialized, as a stream image) stands for, checked
    against the same bounds `POST /events` applies; ValidationError if it breaks one."""
    counter = validation.name(item.get("counter"), "counter")
    event_id = validation.text(item.get("id"), "id", ID_MAX_CHARS)
    for name, unit in (("time", "milliseconds"), ("retention", "seconds")):
        number = item.get(name)
        if not isinstance(number, Decimal) or number != number.to_integral_value():
            raise ValidationError(f"{name} must be an integer number of {unit}")
    retention_s = validation.integer(int(item["retention"]), "retention", MIN_RETENTION_SECONDS, MAX_RETENTION_SECONDS)
    return Event(
        counter,
        event_id,
        times.parse(int(item["time"])),
        retention_s,
        id_given=item.get("id_given") is not False,
        dimensions=event_dimensions.dimensions(item.get("dimensions"), "dimensions"),
        values=event_dimensions.values(item.get("values"), "values"),
    )


def to_item(event: Event, ingest_ms: int, settings: Settings) -> dict[str, Any]:
    """The events-table item (plain Python values) for an event ingested at ingest_ms."""
    item: dict[str, Any] = {
        "pk": partition_key(ingest_ms, secrets.randbelow(settings.event_write_shards)),
        "sk": sort_key(ingest_ms, secrets.token_urlsafe(9)),
        "kind": packs.EVENT_KIND,
        "counter": event.counter,
        "id": event.id,
        "id_given": event.id_given,
        "time": event.time_ms,
        "retention": event.retention_seconds,
        "ingested_at": ingest_ms,
        "attributes": event.attributes,
        "expires_at": ingest_ms // 1000 + settings.event_ttl_seconds,
    }
    given: dict[str, dict[str, Any]] = {"dimensions": event.dimensions, "values": event.values}
    return item | {name: dict(held) for name, held in given.items() if held}


def to_items(events: list[Event], ingest_ms: int, settings: Settings) -> list[tuple[dict[str, Any], list[Event]]]:
    """The items (plain Python values) that store one request's events, each with the events it
    holds: one, or the fewest packs in order (docs/counting.md, "Packs")."""
    items = [to_item(e, ingest_ms, settings) for e in events]
    keys = [{"pk": item["pk"], "sk": item["sk"]} for item in items]
    # A pack is keyed as its first event was drawn: one key while the request fits one pack.
    runs = packs.split([{**item, **keys[0]} for item in items], lambda item: item_sizes.item_size(_serialize(item)))
    return [(packs.pack([{**items[i], **keys[run[0]]} for i in run]), [events[i] for i in run]) for run in runs]


def store(dynamodb: DynamoDB, settings: Settings, events: list[Event], ingest_ms: int) -> list[str]:
    """Write the events' items (to_items) with BatchWriteItem, retrying unprocessed ones (retry.until_done),
    and return the events' ids. An item is written whole or not at all: its events are stored or fail together."""
    pending = [(held, _serialize(item)) for item, held in to_items(events, ingest_ms, settings)]

    def send(left: list[tuple[list[Event], dict[str, Any]]]) -> list[tuple[list[Event], dict[str, Any]]]:
        nonlocal pending
        requests: list[WriteRequestTypeDef] = [{"PutRequest": {"Item": item}} for _, item in left]
        response = dynamodb.batch_write_item(RequestItems={settings.events_table: requests})
        unprocessed = response.get("UnprocessedItems", {}).get(settings.events_table, [])
        keys = {attributes.key_of(r["PutRequest"]["Item"]) for r in unprocessed}
        pending = [(held, item) for held, item in left if attributes.key_of(item) in keys]
        return pending

    try:
        retry.until_done(send, pending, "the events could not be stored; retry the request", STORE_ATTEMPTS, None, 1.0)
    except StorageError as exc:
        failed = {id(e) for held, _ in pending for e in held}
        stored = [e.id for e in events if id(e) not in failed]
        if stored:
            left = [e.id for e in events if id(e) in failed]
            raise PartialWriteError(
                "some events could not be stored; retry those listed in failed", stored, left
            ) from exc
        if isinstance(exc, RejectedError):
            raise RejectedError(
                "DynamoDB refused the events (ValidationException): a field holds a value it cannot "
                "store (counter, id, time or attributes); the same request will be refused again"
            ) from exc.__cause__
        raise
    return [e.id for e in events]


def _serialize(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _SERIALIZER.serialize(v) for k, v in item.items()}
