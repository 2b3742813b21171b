"""Lambda-shaped DynamoDB stream events built from what is in the events table.

Chalice's test client has no DynamoDB-stream generator; these mirror what Lambda delivers to a
mapping with a tumbling window (Tally's): the batch's `shardId`, `window`, `state` and the
window flags beside `Records` (docs/guarantees.md quotes the shape).
"""

from __future__ import annotations

import itertools
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from chalicelib.core.settings import Settings
from tools import iam_enforcement

STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/tally-events/stream/2026-11-21T00:00:00.000"
SHARD = "shardId-00000001795000000000-0a1b2c3d"
_sequence = itertools.count(100_000_000_000_000_000_000)
_serializer = TypeSerializer()
_names = itertools.count()


def image(
    partition: str,
    counter: str,
    t: int,
    *,
    client_id: str | None = None,
    retention: int = 7 * 86400,
    seq: int = 0,
) -> dict[str, Any]:
    """The stored image of a one-event item of the events table (an id is generated without `client_id`)."""
    plain = {
        "pk": partition,
        "sk": f"2026-11-18T08:26:40.000Z#{seq:08d}{next(_names)}",
        "kind": "event",
        "counter": counter,
        "id": client_id or f"gen-{next(_names)}",
        "id_given": client_id is not None,
        "time": t,
        "retention": retention,
    }
    return {k: _serializer.serialize(v) for k, v in plain.items()}


def record(image: dict[str, Any], event_name: str = "INSERT") -> dict[str, Any]:
    number = str(next(_sequence))
    keys = {"pk": image["pk"], "sk": image["sk"]}
    ddb: dict[str, Any] = {
        "ApproximateCreationDateTime": 1_795_000_000.0,
        "Keys": keys,
        "SequenceNumber": number,
        "SizeBytes": 200,
        "StreamViewType": "NEW_IMAGE",
    }
    if event_name != "REMOVE":
        ddb["NewImage"] = image
    return {
        "eventID": f"evt-{number}",
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": ddb,
        "eventSourceARN": STREAM_ARN,
    }


def lambda_event(records: list[dict[str, Any]], shard: str = SHARD) -> dict[str, Any]:
    return {
        "Records": records,
        "window": {"start": "2026-11-18T08:25:00Z", "end": "2026-11-18T08:30:00Z"},
        "state": {},
        "shardId": shard,
        "eventSourceARN": STREAM_ARN,
        "isFinalInvokeForWindow": False,
        "isWindowTerminatedEarly": False,
    }


@iam_enforcement.outside_the_app
def stored_event_records(dynamodb: Any, settings: Settings | None = None) -> list[dict[str, Any]]:
    """INSERT records for every item in the events table, in ingest (sort key) order: what the
    stream delivers (the stream's part, not the app's, wherever a test calls it from)."""
    table = (settings or Settings()).events_table
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {"TableName": table}
    while True:
        response = dynamodb.scan(**request)
        items.extend(response["Items"])
        if "LastEvaluatedKey" not in response:
            break
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
    items.sort(key=lambda item: item["sk"]["S"])
    return [record(item) for item in items]


def batches(records: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [records[i : i + size] for i in range(0, len(records), size)]


def carried(records: list[dict[str, Any]]) -> int:
    """Events the records carry: a pack's `n`, one for an item of the one-event layout."""
    return sum(
        int(r["dynamodb"]["NewImage"].get("n", {}).get("N", "1"))
        if r["dynamodb"].get("NewImage", {}).get("kind", {}).get("S") == "pack"
        else 1
        for r in records
    )
