"""DynamoDB capacity by AWS's rules, counted by wrapping a client (moto's numbers are not reliable).

Item size: attribute names plus values (strings as UTF-8, numbers about one byte per two
digits plus one). Standard writes: 1 WCU per started KB of the larger of the item before and
after; transactional writes: twice that. Reads: 1 RCU per started 4 KB strongly consistent,
half that eventually consistent; a key that finds nothing still costs the minimum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError


def attribute_size(value: dict[str, Any]) -> int:
    (kind, inner), = value.items()
    if kind == "S":
        return len(inner.encode("utf-8"))
    if kind == "N":
        digits = inner.lstrip("-").replace(".", "").lstrip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(inner)
    if kind == "BOOL" or kind == "NULL":
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(attribute_size({kind[0]: v}) for v in inner)
    if kind == "L":
        return 3 + sum(1 + attribute_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + attribute_size(v) for k, v in inner.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode("utf-8")) + attribute_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return units if consistent else units / 2


@dataclass
class Usage:
    transactions: int = 0
    cancelled: int = 0
    items_written: int = 0
    wcu: float = 0.0  # committed writes
    wcu_cancelled: float = 0.0  # what cancelled transactions would have written
    rcu: float = 0.0


class MeteredDynamoDB:
    """Delegates to a real client; counts the work of the calls the view handlers make."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.usage = Usage()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def _stored(self, table: str, key: dict[str, Any]) -> int:
        item = self.real.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        return item_size(item) if item else 0

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.usage.transactions += 1
        actions = kwargs["TransactItems"]
        try:
            response = self.real.transact_write_items(**kwargs)
        except ClientError:
            self.usage.cancelled += 1
            self.usage.wcu_cancelled += sum(2 * write_units(self._size_of(action)) for action in actions)
            raise
        self.usage.items_written += len(actions)
        # Puts here create items and updates only add to numbers: the item after is the larger.
        self.usage.wcu += sum(2 * write_units(self._size_of(action)) for action in actions)
        return response

    def _size_of(self, action: dict[str, Any]) -> int:
        (kind, spec), = action.items()
        if kind == "Put":
            return item_size(spec["Item"])
        if kind == "Update":
            return self._stored(spec["TableName"], spec["Key"])
        raise ValueError(f"not metered: {kind}")

    def batch_get_item(self, **kwargs: Any) -> Any:
        response = self.real.batch_get_item(**kwargs)
        for table, request in kwargs["RequestItems"].items():
            consistent = bool(request.get("ConsistentRead"))
            found = response.get("Responses", {}).get(table, [])
            self.usage.rcu += sum(read_units(item_size(i), consistent) for i in found)
            self.usage.rcu += read_units(0, consistent) * (len(request["Keys"]) - len(found))
        return response
