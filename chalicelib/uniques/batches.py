"""Unique counts, the queue handler side: each batch merged (`UniqueItems`) into its names' day,
hour, quarter-hour and all-time sketches, and its names touched in the catalog. Why a lost race
or a redelivery loses or inflates nothing: docs/design.md, "Unique counts"; poison: "Where poison goes"."""

from __future__ import annotations

import base64
import binascii
import functools
import json
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from chalicelib.core import (
    attributes,
    batch_processor,
    catalog,
    dynamo,
    quarantine,
    retry,
    timebuckets,
    times,
    validation,
)
from chalicelib.core.aws import DynamoDB
from chalicelib.core.batch_processor import Sent, Write
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError, ValidationError
from chalicelib.core.poison import QuarantineSink
from chalicelib.core.queues import Message
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed
from chalicelib.uniques import layout, sketches, windows

MAX_ITEMS = 500
MESSAGE_VERSION = 2
MAX_WRITE_ATTEMPTS = 12
# Minute sketches answer the last few minutes only; an hour outlasts any batching window and retry.
MINUTE_RETENTION_SECONDS = 3600
SOURCE = quarantine.UNIQUES_QUEUE


@dataclass(frozen=True)
class Items:
    """One queue message, parsed: its name, item hashes and the time they count at."""

    message: Message
    name: str
    hashes: bytes
    time_ms: int
    minute: bool


@dataclass(frozen=True)
class Target:
    """A sketch a batch writes: a name's all-time shard (bucket None), or a day, hour or quarter."""

    name: str
    bucket: timebuckets.Bucket | None

    def order(self) -> tuple[str, int, str, int]:
        """Name by name, the all-time shard last (docs/design.md, "Unique counts", back end)."""
        if self.bucket is None:
            return (self.name, 1, "", 0)
        return (self.name, 0, self.bucket.resolution, self.bucket.index)

    def key(self, shard: int) -> dict[str, Any]:
        return layout.shard_key(self.name, shard) if self.bucket is None else layout.bucket_key(self.name, self.bucket)


def message_body(name: str, hashes: bytes, time_ms: int, minute: bool = False) -> str:
    """One message per request, of 8-byte item hashes; `minute`: the items go into their minute's sketch too."""
    encoded = base64.b64encode(hashes).decode("ascii")
    extra = {"minute": True} if minute else {}
    return json.dumps({"v": MESSAGE_VERSION, "name": name, "hashes": encoded, "time": time_ms, **extra})


def parse_message(body: str) -> tuple[str, bytes]:
    """(name, concatenated item hashes) of a queue message; ValidationError if not one of ours."""
    return _parse(body)[:2]


def parse_items(message: Message) -> Items:
    return Items(message, *_parse(message.body))


def _parse(body: str) -> tuple[str, bytes, int, bool]:
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise ValidationError(f"message is not JSON: {exc}") from exc
    if not isinstance(message, dict) or message.get("v") != MESSAGE_VERSION:
        raise ValidationError("message is not a unique-items message of a known version")
    name = validation.name(message.get("name"), "name")
    try:
        raw = base64.b64decode(message.get("hashes", ""), validate=True)
    except (binascii.Error, TypeError, ValueError) as exc:
        raise ValidationError("hashes are not base64") from exc
    size = sketches.HASH_BYTES
    if not raw or len(raw) % size or len(raw) // size > MAX_ITEMS:
        raise ValidationError(f"hashes must be 1-{MAX_ITEMS} values of {size} bytes")
    minute = message.get("minute", False)
    if not isinstance(minute, bool):
        raise ValidationError("minute must be true or false")
    return name, raw, times.parse(message.get("time"), "time"), minute


def targets(settings: Settings, items: Items, now_ms: int) -> list[Target]:
    """The all-time sketch of the items' name, and their day, hour and quarter sketches (and minute
    sketch, when the message asks) unless expired."""
    buckets = windows.buckets_for(items.time_ms)
    if items.minute:
        buckets.append(timebuckets.Bucket("minute", items.time_ms // times.MINUTE_MS))
    live = [b for b in buckets if timebuckets.live(b, retention_s(settings, b.resolution), now_ms)]
    return [Target(items.name, None)] + [Target(items.name, bucket) for bucket in live]


def retention_s(settings: Settings, resolution: str) -> int:
    """Quarter sketches are kept as long as hour sketches: a local day reads both."""
    if resolution == "minute":
        return MINUTE_RETENTION_SECONDS
    return settings.uniques_day_retention_seconds if resolution == "day" else settings.uniques_hour_retention_seconds


class UniqueItems(batch_processor.Capability[Message, Items]):
    """The uniques queue for the batch processor: a message is one request's items, merged into each
    sketch they touch; merging is idempotent, so every write applies all its messages."""

    def __init__(self, dynamodb: DynamoDB, settings: Settings, now_ms: int, shard: int, sleep: Sleep | None) -> None:
        self.dynamodb, self.settings, self.now_ms, self.shard, self.sleep = dynamodb, settings, now_ms, shard, sleep

    @functools.cached_property
    def sink(self) -> QuarantineSink[Message]:
        return QuarantineSink(self.dynamodb, self.settings, SOURCE, lambda m: m.message_id, _record_text, self.now_ms)

    def parse(self, raw: Message) -> list[Items]:
        return [parse_items(raw)]

    def writes(self, records: list[Items]) -> list[Write[Items]]:
        by_target: dict[Target, list[Items]] = defaultdict(list)
        for items in records:
            for target in targets(self.settings, items, self.now_ms):
                by_target[target].append(items)
        return [
            Write(group, functools.partial(self._merge, target))
            for target, group in sorted(by_target.items(), key=lambda entry: entry[0].order())
        ]

    def _merge(self, target: Target, group: list[Items]) -> Sent[Items]:
        """Merge a group's items into one sketch (RejectedError when DynamoDB refuses it)."""
        bucket, key = target.bucket, target.key(self.shard)
        expires = (
            None if bucket is None else timebuckets.expires_at_s(bucket, retention_s(self.settings, bucket.resolution))
        )
        hashes = b"".join(i.hashes for i in group)
        written, conflicts = merge_into(self.dynamodb, self.settings, key, hashes, self.now_ms, expires, self.sleep)
        details = Counter(writes=written, unchanged=1 - written, conflicts=conflicts)
        return Sent(applied=group, calls=1 + conflicts, retries=conflicts, details=details)

    def follow_ups(self, outcome: batch_processor.Outcome[Message, Items]) -> list[Write[Items]]:
        return [Write((), functools.partial(self._touch, name)) for name in sorted({i.name for i in outcome.counted})]

    def _touch(self, name: str, _: list[Items]) -> Sent[Items]:
        # Every batch writes its names (no `Recent`): a name's last_seen is its latest batch's.
        catalog.touch(self.dynamodb, self.settings, layout.CATALOG_KIND, None, {name: None}, self.now_ms)
        return Sent(details=Counter(names=1))

    def summarize(self, outcome: batch_processor.Outcome[Message, Items]) -> Counter[str]:
        return Counter(shard=self.shard, items=sum(len(i.hashes) // sketches.HASH_BYTES for i in outcome.counted))


def apply_messages(
    dynamodb: DynamoDB,
    settings: Settings,
    messages: list[Message],
    now_ms: int,
    sleep: Sleep | None = None,
) -> BatchResult:
    """Merge a batch of queue messages into the sketches; bad ones are set aside, not retried."""
    shard = zlib.crc32((messages[0].message_id if messages else "").encode("utf-8")) % settings.uniques_shards
    return batch_processor.process(UniqueItems(dynamodb, settings, now_ms, shard, sleep), messages)


def merge_into(
    dynamodb: DynamoDB,
    settings: Settings,
    key: dict[str, Any],
    hashes: bytes,
    now_ms: int,
    expires_at_s: int | None,
    sleep: Sleep | None = None,
) -> tuple[int, int]:
    """Add item hashes to one stored sketch: (1 if written else 0, conflicts retried)."""
    table = settings.counts_table
    batch: dict[int, sketches.Sketch] = {}  # by precision: a stored sketch keeps the one it was made with
    for conflicts in retry.attempts(MAX_WRITE_ATTEMPTS, sleep, cap=1.0):
        item = dynamo.get_item(dynamodb, table, key, "could not read a sketch")
        stored = None if item is None else decode_item(item)
        p = stored.p if stored is not None else sketches.precision_for(settings.uniques_error_rate)
        if p not in batch:
            batch[p] = sketches.from_hashes(p, hashes)
        merged = sketches.merge([batch[p]] + ([stored] if stored is not None else []), p)
        if stored is not None and merged == stored:
            return 0, conflicts
        put = {**key, "sketch": {"B": sketches.encode(merged)}, "updated_at": {"S": times.iso(now_ms)}}
        if expires_at_s is not None:
            put["expires_at"] = {"N": str(expires_at_s)}
        try:  # on the version read; RejectedError when DynamoDB refuses the sketch itself
            dynamo.put_versioned(dynamodb, table, put, dynamo.stored_version(item), "could not write a sketch")
        except ConditionFailed:  # another writer got there first
            continue
        return 1, conflicts
    raise StorageError(f"sketch {key['pk']['S']} {key['sk']['S']} kept changing under us; the batch will be retried")


def decode_item(item: dict[str, Any]) -> sketches.Sketch:
    try:
        return sketches.decode(attributes.binary(item, "sketch"))
    except (KeyError, sketches.SketchFormatError) as exc:
        raise StorageError(f"stored sketch {' '.join(attributes.key_of(item))} is unreadable: {exc}") from exc


def _record_text(message: Message) -> str:
    """A message as set aside: ASCII JSON, so lone surrogates are escaped."""
    return json.dumps({"messageId": message.message_id, "body": message.body})
