"""Unique counts, the queue handler side: merge batches into all-time, hour and day sketches.

Each message carries the hashes of one request's items and their time. A batch touches, per
name, the hour and day sketches of its items' times and then one shard of the all-time sketch
(picked from the batch's first message id, so concurrent invocations spread out; see
chalicelib.uniques.keys). Each touched sketch is read once and written once with a condition on
the version read; a writer that loses the race reads again, merges again and retries.
Merging is idempotent and commutative, so neither a lost race nor a redelivered batch can lose
or inflate anything, and a redelivered batch writes nothing.

Hour and day sketches are not sharded: a window is read in one BatchGetItem of at most 100
keys, one key per hour or day it needs, so shards would multiply its cost (a 30-day window
would need more than one call with 2 shards). Concurrent writers of the same hour retry
instead, which the version condition makes safe.

Poison is what a message's content causes, and only that: a message that validation refuses,
or whose sketch write DynamoDB refuses for its data (found by retrying such a write message by
message), is put aside alone under QUARANTINE#uniques-queue on its first delivery and the rest
of the batch is applied. Any other failure, whatever the exception (throttling, storage
unavailable, an unreadable stored sketch, a fault in the code), or a refusal of every message
alike, fails the batch: Lambda leaves it in the queue, and merging again changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import clock, quarantine, timebuckets, transactions, validation
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import REJECTED_ERROR_CODES, RejectedError, StorageError, ValidationError, reason
from chalicelib.core.queues import Message
from chalicelib.core.retry import backoff
from chalicelib.core.settings import Settings
from chalicelib.core.timebuckets import Bucket
from chalicelib.uniques import keys, sketches

MAX_ITEMS = 500
MESSAGE_VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1 had no time: its items count at the time they are applied
MAX_WRITE_ATTEMPTS = 12
SOURCE = "uniques-queue"


class ContendedError(StorageError):
    """A sketch kept changing between our read and our write: retry the batch later."""


@dataclass(frozen=True)
class Items:
    """One queue message, parsed: its name, item hashes and the time they count at."""

    message: Message
    name: str
    hashes: bytes
    time_ms: int


@dataclass(frozen=True)
class Target:
    """A sketch a batch writes: the all-time shard of a name (bucket None) or an hour or day."""

    name: str
    bucket: Bucket | None

    def order(self) -> tuple[str, int, str, int]:
        """Writes go in a fixed order, name by name: days, then hours, then the all-time shard
        last, so an all-time count that includes a batch's items means that batch's day and hour
        sketches of the name are written too (readers poll the all-time count to know a batch
        has landed)."""
        if self.bucket is None:
            return (self.name, 1, "", 0)
        return (self.name, 0, self.bucket.resolution, self.bucket.index)

    def key(self, shard: int) -> dict[str, Any]:
        return keys.shard_key(self.name, shard) if self.bucket is None else keys.bucket_key(self.name, self.bucket)


def message_body(name: str, hashes: bytes, time_ms: int) -> str:
    """One message per request, carrying 8-byte item hashes: any request fits SQS's 256 KB."""
    encoded = base64.b64encode(hashes).decode("ascii")
    return json.dumps({"v": MESSAGE_VERSION, "name": name, "hashes": encoded, "time": time_ms})


def parse_message(body: str) -> tuple[str, bytes]:
    """(name, concatenated item hashes) of a queue message; ValidationError if not one of ours."""
    name, raw, _ = _parse(body)
    return name, raw


def parse_items(message: Message, now_ms: int) -> Items:
    name, raw, time_ms = _parse(message.body)
    return Items(message, name, raw, now_ms if time_ms is None else time_ms)


def _parse(body: str) -> tuple[str, bytes, int | None]:
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise ValidationError(f"message is not JSON: {exc}") from exc
    if not isinstance(message, dict) or message.get("v") not in READABLE_VERSIONS:
        raise ValidationError("message is not a unique-items message of a known version")
    name = validation.name(message.get("name"), "name")
    try:
        raw = base64.b64decode(message.get("hashes", ""), validate=True)
    except (binascii.Error, TypeError, ValueError) as exc:
        raise ValidationError("hashes are not base64") from exc
    size = sketches.HASH_BYTES
    if not raw or len(raw) % size or len(raw) // size > MAX_ITEMS:
        raise ValidationError(f"hashes must be 1-{MAX_ITEMS} values of {size} bytes")
    time_ms = validation.time_ms(message.get("time"), "time") if message.get("v") == MESSAGE_VERSION else None
    return name, raw, time_ms


def choose_shard(messages: list[Message], shards: int) -> int:
    first = messages[0].message_id if messages else ""
    return zlib.crc32(first.encode("utf-8")) % shards


def targets(settings: Settings, items: Items, now_ms: int) -> list[Target]:
    """The all-time sketch of the items' name, and their hour and day sketches unless expired."""
    hour, day = timebuckets.buckets_for(items.time_ms)
    live = [
        bucket
        for bucket, retention in (
            (hour, settings.uniques_hour_retention_seconds),
            (day, settings.uniques_day_retention_seconds),
        )
        if timebuckets.live(bucket, retention, now_ms)
    ]
    return [Target(items.name, None)] + [Target(items.name, bucket) for bucket in live]


def retention_s(settings: Settings, bucket: Bucket | None) -> int | None:
    if bucket is None:
        return None
    return (
        settings.uniques_hour_retention_seconds
        if bucket.resolution == "hour"
        else settings.uniques_day_retention_seconds
    )


def apply_messages(
    dynamodb: Any,
    settings: Settings,
    messages: list[Message],
    now_ms: int,
    sleep: Sleep | None = None,
) -> BatchResult:
    """Merge a batch of queue messages into the sketches; bad ones are set aside, not retried."""
    result = BatchResult(records=len(messages))
    shard = choose_shard(messages, settings.uniques_shards)
    result.details["shard"] = shard
    set_aside: dict[str, str] = {}
    by_target: dict[Target, list[Items]] = defaultdict(list)
    for message in messages:
        try:
            items = parse_items(message, now_ms)
        except ValidationError as exc:  # the message's content: set aside, never retried
            set_aside[message.message_id] = reason(exc)
            _quarantine(dynamodb, settings, message, set_aside[message.message_id], now_ms)
            continue
        for target in targets(settings, items, now_ms):
            by_target[target].append(items)
    for target, group in sorted(by_target.items(), key=lambda entry: entry[0].order()):
        group = [i for i in group if i.message.message_id not in set_aside]  # already failed alone
        if not group:
            continue
        failed = _write_target(dynamodb, settings, target, shard, group, now_ms, sleep, result)
        for items, why in failed:
            if items.message.message_id not in set_aside:
                set_aside[items.message.message_id] = why
                _quarantine(dynamodb, settings, items.message, why, now_ms)
    applied = {i.message.message_id: i for g in by_target.values() for i in g if i.message.message_id not in set_aside}
    result.quarantined = list(set_aside)
    result.counted = len(applied)
    result.details["items"] += sum(len(i.hashes) // sketches.HASH_BYTES for i in applied.values())
    for name in sorted({i.name for i in applied.values()}):
        _touch_name(dynamodb, settings, name, now_ms)
        result.details["names"] += 1
    return result


def _write_target(
    dynamodb: Any,
    settings: Settings,
    target: Target,
    shard: int,
    group: list[Items],
    now_ms: int,
    sleep: Sleep | None,
    result: BatchResult,
) -> list[tuple[Items, str]]:
    """Merge a group's items into one sketch; the messages that cannot be merged even alone."""
    key, retention = target.key(shard), retention_s(settings, target.bucket)
    expires = None if target.bucket is None or retention is None else timebuckets.expires_at_s(target.bucket, retention)

    def merge(hashes: bytes) -> None:
        written, conflicts = merge_into(dynamodb, settings, key, hashes, now_ms, expires, sleep)
        result.transactions += 1 + conflicts
        result.retries += conflicts
        result.details["writes"] += written
        result.details["unchanged"] += 1 - written
        result.details["conflicts"] += conflicts

    try:
        merge(b"".join(i.hashes for i in group))
        return []
    except RejectedError as exc:  # DynamoDB refuses the data: find the messages it refuses alone
        first_failure = exc
    failed: list[tuple[Items, str]] = []
    for items in group:  # merging twice changes nothing
        try:
            merge(items.hashes)
        except RejectedError as exc:
            failed.append((items, reason(exc)))
    if len(group) > 1 and len(failed) == len(group):
        raise StorageError(f"every message failed on {key['pk']['S']} {key['sk']['S']}") from first_failure
    return failed


def merge_into_shard(
    dynamodb: Any,
    settings: Settings,
    name: str,
    shard: int,
    hashes: bytes,
    now_ms: int,
    sleep: Sleep | None = None,
) -> tuple[int, int]:
    """Add item hashes to one shard of a name's all-time sketch: (1 if written else 0, conflicts)."""
    return merge_into(dynamodb, settings, keys.shard_key(name, shard), hashes, now_ms, None, sleep)


def merge_into(
    dynamodb: Any,
    settings: Settings,
    key: dict[str, Any],
    hashes: bytes,
    now_ms: int,
    expires_at_s: int | None,
    sleep: Sleep | None = None,
) -> tuple[int, int]:
    """Add item hashes to one stored sketch: (1 if written else 0, conflicts retried)."""
    batch: dict[int, sketches.Sketch] = {}  # by precision: a stored sketch keeps the one it was made with
    for conflicts in range(MAX_WRITE_ATTEMPTS):
        stored, version = _read_sketch(dynamodb, settings, key)
        p = stored.p if stored is not None else sketches.precision_for(settings.uniques_error_rate)
        if p not in batch:
            batch[p] = sketches.from_hashes(p, hashes)
        merged = sketches.merge([batch[p]] + ([stored] if stored is not None else []), p)
        if stored is not None and merged == stored:
            return 0, conflicts
        if _write_sketch(dynamodb, settings, key, merged, version, now_ms, expires_at_s):
            return 1, conflicts
        (sleep or clock.sleep)(backoff(conflicts, cap=1.0))
    where = f"{key['pk']['S']} {key['sk']['S']}"
    raise ContendedError(f"sketch {where} kept changing under us; the batch will be retried")


def _read_sketch(dynamodb: Any, settings: Settings, key: dict[str, Any]) -> tuple[sketches.Sketch | None, int]:
    try:
        item = dynamodb.get_item(TableName=settings.counts_table, Key=key, ConsistentRead=True).get("Item")
    except ClientError as exc:
        raise StorageError("could not read a sketch") from exc
    if item is None:
        return None, 0
    return decode_item(item), int(item["version"]["N"])


def _write_sketch(
    dynamodb: Any,
    settings: Settings,
    key: dict[str, Any],
    sketch: sketches.Sketch,
    version: int,
    now_ms: int,
    expires_at_s: int | None,
) -> bool:
    """Conditional put on the version read; False if another writer got there first."""
    condition: dict[str, Any] = (
        {"ConditionExpression": "attribute_not_exists(pk)"}
        if version == 0
        else {"ConditionExpression": "version = :v", "ExpressionAttributeValues": {":v": {"N": str(version)}}}
    )
    item = {
        **key,
        "sketch": {"B": sketches.encode(sketch)},
        "version": {"N": str(version + 1)},
        "updated_at": {"S": validation.iso(now_ms)},
    }
    if expires_at_s is not None:
        item["expires_at"] = {"N": str(expires_at_s)}
    try:
        dynamodb.put_item(TableName=settings.counts_table, Item=item, **condition)
    except ClientError as exc:
        code = transactions.error_code(exc)
        if code == "ConditionalCheckFailedException":
            return False
        if code in REJECTED_ERROR_CODES:
            raise RejectedError(f"DynamoDB refused the sketch: {code}") from exc
        raise StorageError("could not write a sketch") from exc
    return True


def _touch_name(dynamodb: Any, settings: Settings, name: str, now_ms: int) -> None:
    """Record that a name has items (one small write per name per batch; never moves back)."""
    try:
        dynamodb.update_item(
            TableName=settings.counts_table,
            Key=keys.name_key(name),
            UpdateExpression="SET last_seen = :t",
            ConditionExpression="attribute_not_exists(last_seen) OR last_seen < :t",
            ExpressionAttributeValues={":t": {"N": str(now_ms)}},
        )
    except ClientError as exc:
        if transactions.error_code(exc) != "ConditionalCheckFailedException":
            raise StorageError("could not record a unique-count name") from exc


def decode_item(item: dict[str, Any]) -> sketches.Sketch:
    try:
        return sketches.decode(bytes(item["sketch"]["B"]))
    except (KeyError, sketches.SketchFormatError) as exc:
        where = f"{item.get('pk', {}).get('S')} {item.get('sk', {}).get('S')}"
        raise StorageError(f"stored sketch {where} is unreadable: {exc}") from exc


def _quarantine(dynamodb: Any, settings: Settings, message: Message, reason: str, now_ms: int) -> None:
    """Set a message that cannot be applied aside, keyed by its message id."""
    record = json.dumps({"messageId": message.message_id, "body": message.body})  # ASCII: surrogates escaped
    quarantine.put(dynamodb, settings, SOURCE, message.message_id, record, reason, now_ms)
