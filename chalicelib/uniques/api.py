"""Unique counts, the routes side: validate and queue items, answer cardinalities of one name or a union."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError
from hyperloglog import HyperLogLog

from chalicelib.core import dynamo, queues, validation
from chalicelib.core.errors import StorageError, ValidationError
from chalicelib.core.settings import Settings
from chalicelib.uniques import sketch_encoding as sketches
from chalicelib.uniques.batches import MAX_ITEMS, MESSAGE_VERSION, SKETCH_PREFIX, decode_item

MAX_ITEM_CHARS = 1024
MAX_UNION_NAMES = 50

Sleep = Callable[[float], None]


def parse_items(body: Any) -> list[str]:
    """The items of a POST body `{"data": item}` or `{"data": [items]}`."""
    if not isinstance(body, dict) or set(body) != {"data"}:
        raise ValidationError('the body must be {"data": item} or {"data": [items]}')
    data = body["data"]
    items = [data] if isinstance(data, str) else data
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_ITEMS:
        raise ValidationError(f"data must be a string or a list of 1-{MAX_ITEMS} strings")
    for index, item in enumerate(items):
        if not isinstance(item, str) or not 1 <= len(item) <= MAX_ITEM_CHARS:
            raise ValidationError(f"data[{index}] must be a string of 1-{MAX_ITEM_CHARS} characters")
    return items


def message_body(name: str, items: list[str]) -> str:
    """One message per request, carrying 8-byte item hashes: any request fits SQS's 256 KB."""
    hashes = base64.b64encode(sketches.item_hashes(items)).decode("ascii")
    return json.dumps({"v": MESSAGE_VERSION, "name": name, "hashes": hashes})


def enqueue(sqs: Any, settings: Settings, name: str, items: list[str]) -> int:
    try:
        sqs.send_message(QueueUrl=queues.queue_url(sqs, settings.uniques_queue), MessageBody=message_body(name, items))
    except ClientError as exc:
        raise StorageError("could not queue the items") from exc
    return len(items)


def parse_names(raw: str | None) -> list[str]:
    """`names=a,b,c` as distinct validated names, in the order given."""
    if not raw:
        raise ValidationError("names must list 1 or more sketch names, comma separated")
    names = list(dict.fromkeys(part.strip() for part in raw.split(",")))
    if len(names) > MAX_UNION_NAMES:
        raise ValidationError(f"names may list at most {MAX_UNION_NAMES} sketches")
    return [validation.name(n, "names") for n in names]


def cardinality(dynamodb: Any, settings: Settings, names: list[str]) -> dict[str, Any]:
    """Estimate of the union of the named sketches: one Query per name over its shards."""
    shards = [shard for name in names for shard in _read_all_shards(dynamodb, settings, name)]
    merged = sketches.merge(shards, sketches.precision_for(settings.uniques_error_rate))
    return {"cardinality": sketches.estimate(merged), "error_rate": round(sketches.standard_error(merged.p), 6)}


def _read_all_shards(dynamodb: Any, settings: Settings, name: str) -> list[HyperLogLog]:
    request: dict[str, Any] = {
        "TableName": settings.counts_table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": f"{SKETCH_PREFIX}{name}"}},
        "ProjectionExpression": "pk, sk, sketch",
    }
    pages = dynamo.query_pages(dynamodb, request, "could not read the sketches")
    return [decode_item(item) for page in pages for item in page.get("Items", [])]
