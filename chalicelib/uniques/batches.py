"""Unique counts, the queue handler side: merge batches into sharded sketches.

Sketches live in the counts table: pk "HLL#<name>", sk "shard#<nn>", attributes `sketch`
(chalicelib.uniques.sketch_encoding binary form) and `version`. A batch goes to one shard (picked
from its first message id, so concurrent invocations spread out); each sketch it touches is read
once and written once with a condition on the version it read. A writer that loses the race reads
again, merges again and retries: HyperLogLog merging is idempotent and commutative, so neither a
lost race nor a redelivered batch can lose or inflate anything.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError
from hyperloglog import HyperLogLog

from chalicelib.core import keyspace, quarantine, validation
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.errors import StorageError, ValidationError
from chalicelib.core.queues import Message
from chalicelib.core.retry import backoff
from chalicelib.core.settings import Settings
from chalicelib.uniques import sketch_encoding as sketches

SKETCH_PREFIX = keyspace.SKETCH
MAX_ITEMS = 500
MESSAGE_VERSION = 1
MAX_WRITE_ATTEMPTS = 12

Sleep = Callable[[float], None]


def sketch_key(name: str, shard: int) -> dict[str, Any]:
    return {"pk": {"S": f"{SKETCH_PREFIX}{name}"}, "sk": {"S": f"shard#{shard:02d}"}}


def parse_message(body: str) -> tuple[str, bytes]:
    """(name, concatenated item hashes) of a queue message; ValidationError if not one of ours."""
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise ValidationError(f"message is not JSON: {exc}") from exc
    if not isinstance(message, dict) or message.get("v") != MESSAGE_VERSION:
        raise ValidationError("message is not a version 1 unique-items message")
    name = validation.name(message.get("name"), "name")
    try:
        raw = base64.b64decode(message.get("hashes", ""), validate=True)
    except (binascii.Error, TypeError, ValueError) as exc:
        raise ValidationError("hashes are not base64") from exc
    size = sketches.HASH_BYTES
    if not raw or len(raw) % size or len(raw) // size > MAX_ITEMS:
        raise ValidationError(f"hashes must be 1-{MAX_ITEMS} values of {size} bytes")
    return name, raw


def choose_shard(messages: list[Message], shards: int) -> int:
    first = messages[0].message_id if messages else ""
    return zlib.crc32(first.encode("utf-8")) % shards


def apply_messages(
    dynamodb: Any,
    settings: Settings,
    messages: list[Message],
    now_ms: int,
    sleep: Sleep = time.sleep,
) -> BatchResult:
    """Merge a batch of queue messages into the sketches; bad ones are set aside, not retried."""
    result = BatchResult(records=len(messages))
    shard = choose_shard(messages, settings.uniques_shards)
    result.details["shard"] = shard
    hashes_by_name: dict[str, list[bytes]] = defaultdict(list)
    for message in messages:
        try:
            name, hashes = parse_message(message.body)
        except ValidationError as exc:
            _quarantine(dynamodb, settings, message, str(exc), now_ms)
            result.quarantined.append(message.message_id)
            continue
        result.counted += 1
        hashes_by_name[name].append(hashes)
        result.details["items"] += len(hashes) // sketches.HASH_BYTES
    for name, parts in sorted(hashes_by_name.items()):
        written, conflicts = merge_into_shard(dynamodb, settings, name, shard, b"".join(parts), now_ms, sleep)
        result.transactions += 1 + conflicts
        result.retries += conflicts
        result.details["writes"] += written
        result.details["unchanged"] += 1 - written
        result.details["conflicts"] += conflicts
    return result


def merge_into_shard(
    dynamodb: Any,
    settings: Settings,
    name: str,
    shard: int,
    hashes: bytes,
    now_ms: int,
    sleep: Sleep = time.sleep,
) -> tuple[int, int]:
    """Add item hashes to one shard's sketch: (1 if written else 0, conflicts retried)."""
    key = sketch_key(name, shard)
    batch: dict[int, HyperLogLog] = {}  # by precision: a stored sketch keeps the one it was made with
    for conflicts in range(MAX_WRITE_ATTEMPTS):
        stored, version = _read_shard(dynamodb, settings, key)
        p = stored.p if stored is not None else sketches.precision_for(settings.uniques_error_rate)
        if p not in batch:
            batch[p] = sketches.from_hashes(p, hashes)
        merged = sketches.merge([batch[p]] + ([stored] if stored is not None else []), p)
        if stored is not None and merged == stored:
            return 0, conflicts
        if _write_shard(dynamodb, settings, key, merged, version, now_ms):
            return 1, conflicts
        sleep(backoff(conflicts, cap=1.0))
    raise StorageError(f"sketch {name} shard {shard} kept changing under us; the batch will be retried")


def _read_shard(dynamodb: Any, settings: Settings, key: dict[str, Any]) -> tuple[HyperLogLog | None, int]:
    try:
        item = dynamodb.get_item(TableName=settings.counts_table, Key=key, ConsistentRead=True).get("Item")
    except ClientError as exc:
        raise StorageError("could not read a sketch") from exc
    if item is None:
        return None, 0
    return decode_item(item), int(item["version"]["N"])


def _write_shard(
    dynamodb: Any, settings: Settings, key: dict[str, Any], sketch: HyperLogLog, version: int, now_ms: int
) -> bool:
    """Conditional put on the version read; False if another writer got there first."""
    condition: dict[str, Any] = (
        {"ConditionExpression": "attribute_not_exists(pk)"}
        if version == 0
        else {"ConditionExpression": "version = :v", "ExpressionAttributeValues": {":v": {"N": str(version)}}}
    )
    try:
        dynamodb.put_item(
            TableName=settings.counts_table,
            Item={
                **key,
                "sketch": {"B": sketches.encode(sketch)},
                "version": {"N": str(version + 1)},
                "updated_at": {"S": validation.iso(now_ms)},
            },
            **condition,
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            return False
        raise StorageError("could not write a sketch") from exc
    return True


def decode_item(item: dict[str, Any]) -> HyperLogLog:
    try:
        return sketches.decode(bytes(item["sketch"]["B"]))
    except (KeyError, sketches.SketchFormatError) as exc:
        where = f"{item.get('pk', {}).get('S')} {item.get('sk', {}).get('S')}"
        raise StorageError(f"stored sketch {where} is unreadable: {exc}") from exc


def _quarantine(dynamodb: Any, settings: Settings, message: Message, reason: str, now_ms: int) -> None:
    """Set a message that cannot be applied aside, keyed by its message id."""
    quarantine.put(
        dynamodb,
        settings,
        "uniques-queue",
        message.message_id,
        json.dumps({"messageId": message.message_id, "body": message.body}),
        reason,
        now_ms,
    )
