"""DynamoDB capacity for the benchmarks, priced by AWS's published rules.

moto does not report consumed capacity faithfully, so units are computed here from the
requests and the stored items, for every call a metered client makes (botocore event hooks):

- item size: attribute names plus values; strings as UTF-8, binary as raw bytes, numbers one
  byte per two significant digits plus one, booleans and nulls one byte, lists and maps 3
  bytes plus one per element, sets the sum of their members;
- writes: 1 WCU per started KB of the larger of the item before and after, transactional
  writes (condition checks included) twice that;
- reads: 1 RCU per started 4 KB strongly consistent, half that eventually consistent; a key
  that finds nothing still costs the minimum; a Query or Scan page is charged on the total
  size of the items it evaluated, whatever its filter or projection returned.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, fields
from typing import Any

from chalicelib.core.dynamo_limits import KB
from chalicelib.core.item_sizes import attribute_size, item_size, number_size

__all__ = ["KB", "attribute_size", "item_size", "number_size"]

# -- sizing rules (pure) ------------------------------------------------------------------------

READ_BLOCK = 4 * KB


def write_units(size: int, transactional: bool = False) -> int:
    units = max(1, math.ceil(size / KB))
    return 2 * units if transactional else units


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_BLOCK))
    return units if consistent else units / 2


# -- metering a client ---------------------------------------------------------------------------


@dataclass
class Usage:
    """The work of one operation (or a sum of them)."""

    requests: int = 0
    items_read: int = 0
    items_written: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    cancelled: int = 0  # cancelled transactions
    cancelled_write_units: float = 0.0  # what they would have written
    failed_conditions: int = 0  # single-item writes whose condition failed (charged in write_units)

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def per(self, count: int, per: int = 1000) -> dict[str, float]:
        return {f.name: getattr(self, f.name) * per / count for f in fields(self)}


_WRITES = ("PutItem", "UpdateItem", "DeleteItem")
_PARTIAL_ITEMS = ("ProjectionExpression", "AttributesToGet", "Select")
_WHOLE_ITEM_DROPS = (
    *_PARTIAL_ITEMS,
    "FilterExpression",
    "ScanFilter",
    "QueryFilter",
    "ExpressionAttributeNames",
    "ExpressionAttributeValues",
)


class Meter:
    """Counts the work of every DynamoDB call the clients it is attached to make.

    `reader` is an unmetered client (or a MotoProbe) used to size stored items: before a write
    (writes cost the larger size) and after it, and to re-read a Query or Scan page whole.
    """

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.by_operation: dict[str, Usage] = defaultdict(Usage)
        # Write units by what was written: the partition key's prefix (`URL#`, `VTOP#`, ...).
        self.writes_by_kind: dict[str, float] = defaultdict(float)
        self._schemas: dict[str, list[str]] = {}

    def total(self, *operations: str) -> Usage:
        """All operations, or only those named."""
        chosen = operations or tuple(self.by_operation)
        return sum((self.by_operation[op] for op in chosen if op in self.by_operation), Usage())

    def attach(self, client: Any) -> Any:
        def before(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
            self.by_operation[model.name].requests += 1
            context["metered"] = (dict(params), self._stored_sizes(self._targets(model.name, params)))

        def after(parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
            if "metered" in context:
                params, before_sizes = context.pop("metered")
                self._charge(self.by_operation[model.name], model.name, params, parsed, before_sizes)

        client.meta.events.register("before-parameter-build.dynamodb.*", before)
        client.meta.events.register("after-call.dynamodb.*", after)
        return client

    def _charge(
        self, usage: Usage, operation: str, params: dict[str, Any], parsed: dict[str, Any], before: list[int]
    ) -> None:
        error = parsed.get("Error", {}).get("Code")
        if operation == "TransactWriteItems" and error == "TransactionCanceledException":
            usage.cancelled += 1
            usage.cancelled_write_units += sum(
                write_units(max(size, item_size(op.get("Item"))), transactional=True)
                for size, (_, op) in zip(before, self._targets(operation, params))
            )
        if operation in _WRITES and error == "ConditionalCheckFailedException":
            # DynamoDB charges a write whose condition fails by the existing item's size, at least
            # one unit (developer guide, "Capacity unit consumption for write operations").
            usage.failed_conditions += 1
            usage.write_units += write_units(before[0])
            self.writes_by_kind[_kind(self._key_of(params))] += write_units(before[0])
        if error:
            return
        if operation in (*_WRITES, "TransactWriteItems", "BatchWriteItem"):
            targets = self._targets(operation, params)
            after = self._stored_sizes([t for t in targets if t[0] != "ConditionCheck"])
            after_sizes = iter(after)
            for (kind, op), size in zip(targets, before):
                if kind != "ConditionCheck":
                    size = max(size, next(after_sizes))
                    usage.items_written += 1
                units = write_units(size, transactional=operation == "TransactWriteItems")
                usage.write_units += units
                self.writes_by_kind[_kind(self._key_of(op))] += units
        elif operation == "GetItem":
            usage.items_read += "Item" in parsed
            usage.read_units += read_units(item_size(parsed.get("Item")), params.get("ConsistentRead", False))
        elif operation == "BatchGetItem":
            for table, request in params["RequestItems"].items():
                consistent = request.get("ConsistentRead", False)
                found = parsed.get("Responses", {}).get(table, [])
                unprocessed = len(parsed.get("UnprocessedKeys", {}).get(table, {}).get("Keys", []))
                usage.items_read += len(found)
                usage.read_units += sum(read_units(item_size(i), consistent) for i in found)
                usage.read_units += read_units(0, consistent) * (len(request["Keys"]) - len(found) - unprocessed)
        elif operation in ("Query", "Scan"):
            scanned = parsed.get("ScannedCount", parsed.get("Count", 0))
            usage.items_read += scanned
            evaluated = self._evaluated(operation, params, parsed, scanned)
            usage.read_units += read_units(sum(item_size(i) for i in evaluated), params.get("ConsistentRead", False))

    def _evaluated(
        self, operation: str, params: dict[str, Any], parsed: dict[str, Any], scanned: int
    ) -> list[dict[str, Any]]:
        """The page's items as evaluated: whole, before any filter."""
        items = parsed.get("Items", [])
        if not scanned or (len(items) == scanned and not any(k in params for k in _PARTIAL_ITEMS)):
            return items
        call = self.reader.query if operation == "Query" else self.reader.scan
        return call(**whole_items_request(params, scanned))["Items"]

    def _targets(self, operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """(kind, request) of every item a write names, each with its TableName."""
        if operation in _WRITES:
            return [(operation, params)]
        if operation == "TransactWriteItems":
            return [next(iter(entry.items())) for entry in params["TransactItems"]]
        if operation == "BatchWriteItem":
            return [
                (kind, {"TableName": table, **op})
                for table, requests in params["RequestItems"].items()
                for request in requests
                for kind, op in request.items()
            ]
        return []

    def _stored_sizes(self, targets: list[tuple[str, dict[str, Any]]]) -> list[int]:
        return [
            item_size(
                self.reader.get_item(TableName=op["TableName"], Key=self._key_of(op), ConsistentRead=True).get("Item")
            )
            for _, op in targets
        ]

    def _key_of(self, op: dict[str, Any]) -> dict[str, Any]:
        if "Key" in op:
            return op["Key"]
        table = op["TableName"]
        if table not in self._schemas:
            schema = self.reader.describe_table(TableName=table)["Table"]["KeySchema"]
            self._schemas[table] = [k["AttributeName"] for k in schema]
        return {name: op["Item"][name] for name in self._schemas[table]}


def _kind(key: dict[str, Any]) -> str:
    """What an item is, for the breakdown: its partition key up to and with the first `#`."""
    value: Any = next(iter(key.values()), {})
    text = str(value.get("S", "")) if isinstance(value, dict) else ""
    head, sep, _ = text.partition("#")
    return head + sep if sep else "other"


def whole_items_request(request: dict[str, Any], limit: int) -> dict[str, Any]:
    """The same page request without projection and filter: the same items evaluated, returned whole."""
    shadow = {k: v for k, v in request.items() if k not in _WHOLE_ITEM_DROPS}
    condition = shadow.get("KeyConditionExpression", "")
    for field_name in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        used = {k: v for k, v in request.get(field_name, {}).items() if k in condition}
        if used:
            shadow[field_name] = used
    shadow["Limit"] = limit
    return shadow


class MotoProbe:
    """An unmetered reader for in-process moto: item sizes straight from its backend (the same
    answers as a GetItem without a round trip per metered write); Query and Scan through
    `client`."""

    def __init__(self, client: Any, account: str = "123456789012", region: str = "us-east-1") -> None:
        from moto.dynamodb.models import dynamodb_backends

        self._backend = dynamodb_backends[account][region]
        self._client = client

    def get_item(self, TableName: str, Key: dict[str, Any], **_: Any) -> dict[str, Any]:
        item = self._backend.get_item(TableName, Key)
        return {"Item": item.to_json()["Attributes"]} if item else {}

    def describe_table(self, TableName: str) -> dict[str, Any]:
        table = self._backend.get_table(TableName)
        schema = [{"AttributeName": table.hash_key_attr, "KeyType": "HASH"}]
        if table.range_key_attr:
            schema.append({"AttributeName": table.range_key_attr, "KeyType": "RANGE"})
        return {"Table": {"KeySchema": schema}}

    def query(self, **request: Any) -> Any:
        return self._client.query(**request)

    def scan(self, **request: Any) -> Any:
        return self._client.scan(**request)
