"""DynamoDB capacity metering for benchmarks, by AWS's published rules.

moto does not report consumed capacity faithfully, so units are computed here from the
requests and the stored items: a standard write costs 1 WCU per started KB of the item
(the larger of its size before and after), a transactional write twice that; a read costs
1 RCU per started 4 KB when strongly consistent and half that when eventually consistent;
a Query or Scan is charged on the total size of the items it reads, per page.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


def attribute_size(value: dict[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        return len(raw.lstrip("-").replace(".", "").lstrip("0") or "0") // 2 + 1
    if kind == "B":
        return len(raw)
    if kind in ("SS", "NS", "BS"):
        return sum(attribute_size({kind[0]: member}) for member in raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + attribute_size(v) for k, v in raw.items())
    if kind == "L":
        return 3 + sum(attribute_size(v) for v in raw)
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return units if consistent else units / 2


@dataclass
class Meter:
    """Requests and capacity units of one design, by operation."""

    requests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    write_units: float = 0
    read_units: float = 0
    items_written: int = 0
    items_read: int = 0

    def attach(self, client: Any, probe: Any) -> None:
        """Meter every DynamoDB call `client` makes; `probe` is an unmetered client to read sizes."""
        def before(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
            self.requests[model.name] += 1
            context["metered"] = (params, _before_sizes(probe, model.name, params))

        def after(parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
            params, before_sizes = context.pop("metered", (None, None))
            self._charge(probe, model.name, params, parsed, before_sizes)

        client.meta.events.register("before-parameter-build.dynamodb.*", before)
        client.meta.events.register("after-call.dynamodb.*", after)

    def _charge(self, probe: Any, operation: str, params: Any, parsed: dict[str, Any], before: Any) -> None:
        if params is None or "Error" in parsed:
            return
        if operation in ("PutItem", "UpdateItem", "DeleteItem"):
            self._write(probe, params["TableName"], _key_of(probe, params), before.get(0, 0) if before else 0, 1)
        elif operation == "TransactWriteItems":
            for i, entry in enumerate(params["TransactItems"]):
                ((kind, op),) = entry.items()
                if kind == "ConditionCheck":
                    self.write_units += 2 * write_units(before.get(i, 0) if before else 0)
                    continue
                self._write(probe, op["TableName"], _key_of(probe, op), before.get(i, 0) if before else 0, 2)
        elif operation == "BatchWriteItem":
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    item = request.get("PutRequest", {}).get("Item")
                    self.items_written += 1
                    self.write_units += write_units(item_size(item) if item else 0)
        elif operation == "BatchGetItem":
            for table, items in parsed.get("Responses", {}).items():
                consistent = params["RequestItems"][table].get("ConsistentRead", False)
                for item in items:
                    self.items_read += 1
                    self.read_units += read_units(item_size(item), consistent)
        elif operation == "GetItem":
            item = parsed.get("Item")
            self.items_read += 1 if item else 0
            self.read_units += read_units(item_size(item) if item else 0, params.get("ConsistentRead", False))
        elif operation in ("Query", "Scan"):
            # Charged on what was read before any filter: ScannedCount items, their sizes summed.
            scanned = parsed.get("ScannedCount", parsed.get("Count", 0))
            self.items_read += scanned
            size = sum(item_size(i) for i in parsed.get("Items", []))
            if parsed.get("Count", 0) and scanned > parsed["Count"]:
                size = size * scanned // parsed["Count"]
            elif scanned and not parsed.get("Count"):
                size = scanned * 200  # every item filtered out: estimate from a typical event
            self.read_units += read_units(size, params.get("ConsistentRead", False))

    def _write(self, probe: Any, table: str, key: dict[str, Any], before_size: int, factor: int) -> None:
        after = probe.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        self.items_written += 1
        self.write_units += factor * write_units(max(before_size, item_size(after) if after else 0))

    def per(self, events: int, per: int = 1000) -> dict[str, float]:
        scale = per / events
        return {
            "requests": sum(self.requests.values()) * scale,
            "write_units": self.write_units * scale,
            "items_written": self.items_written * scale,
        }


def _key_of(probe: Any, op: dict[str, Any]) -> dict[str, Any]:
    if "Key" in op:
        return op["Key"]
    schema = _key_schema(probe, op["TableName"])
    return {name: op["Item"][name] for name in schema}


_SCHEMAS: dict[str, list[str]] = {}


def _key_schema(probe: Any, table: str) -> list[str]:
    if table not in _SCHEMAS:
        _SCHEMAS[table] = [k["AttributeName"] for k in probe.describe_table(TableName=table)["Table"]["KeySchema"]]
    return _SCHEMAS[table]


def _before_sizes(probe: Any, operation: str, params: dict[str, Any]) -> dict[int, int]:
    """Sizes of the items a write will touch, before it runs (writes cost the larger size)."""
    targets: list[tuple[str, dict[str, Any]]] = []
    if operation in ("PutItem", "UpdateItem", "DeleteItem"):
        targets = [(params["TableName"], params)]
    elif operation == "TransactWriteItems":
        targets = [next(iter(entry.values())) for entry in params["TransactItems"]]
        targets = [(op["TableName"], op) for op in targets]
    sizes = {}
    for i, (table, op) in enumerate(targets):
        found = probe.get_item(TableName=table, Key=_key_of(probe, op), ConsistentRead=True).get("Item")
        sizes[i] = item_size(found) if found else 0
    return sizes


class MotoProbe:
    """Reads item sizes straight from in-process moto's backend: the same answers as a
    GetItem, without a round trip per metered write (which made long runs crawl)."""

    def __init__(self, account: str = "123456789012", region: str = "us-east-1") -> None:
        from moto.dynamodb.models import dynamodb_backends

        self._backend = dynamodb_backends[account][region]

    def get_item(self, TableName: str, Key: dict[str, Any], **_: Any) -> dict[str, Any]:  # noqa: N803
        item = self._backend.get_item(TableName, Key)
        return {"Item": item.to_json()["Attributes"]} if item else {}

    def describe_table(self, TableName: str) -> dict[str, Any]:  # noqa: N803
        table = self._backend.get_table(TableName)
        schema = [{"AttributeName": table.hash_key_attr, "KeyType": "HASH"}]
        if table.range_key_attr:
            schema.append({"AttributeName": table.range_key_attr, "KeyType": "RANGE"})
        return {"Table": {"KeySchema": schema}}
