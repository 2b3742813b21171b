"""Reading DynamoDB's typed attribute values (`{"N": "3"}`) into Python values, the one way every reader does. Pure.
Why an absent attribute without a default is a KeyError: docs/design.md, "One way for each mechanism"."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

Item = Mapping[str, Any]
_ABSENT: Any = object()
_DESERIALIZER = TypeDeserializer()


def _value(item: Item, name: str, kind: str, default: Any) -> Any:
    if name not in item and default is not _ABSENT:
        return default
    return item[name][kind]


def text(item: Item, name: str, default: str = _ABSENT) -> str:
    return str(_value(item, name, "S", default))


def optional_text(item: Item, name: str) -> str | None:
    return text(item, name) if name in item else None


def integer(item: Item, name: str, default: int = _ABSENT) -> int:
    return int(_value(item, name, "N", default))


def optional_integer(item: Item, name: str) -> int | None:
    return integer(item, name) if name in item else None


def decimal(item: Item, name: str, default: Decimal = _ABSENT) -> Decimal:
    """A number attribute (N), exactly."""
    return Decimal(_value(item, name, "N", default))


def binary(item: Item, name: str) -> bytes:
    return bytes(item[name]["B"])


def string_set(item: Item, name: str) -> frozenset[str]:
    return frozenset(item[name]["SS"])


def text_list(item: Item, name: str) -> tuple[str, ...]:
    """A list attribute (L) of strings; an absent list is empty."""
    return tuple(str(value["S"]) for value in item.get(name, {}).get("L", []))


def partition_key(item: Item) -> str:
    return text(item, "pk")


def sort_key(item: Item) -> str:
    return text(item, "sk")


def key_of(item: Item) -> tuple[str, str]:
    """An item's (or a key's) partition and sort key."""
    return text(item, "pk"), text(item, "sk")


def by_key(items: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Items found by a batch read, by their (partition key, sort key)."""
    return {key_of(item): item for item in items}


def deserialized(item: Item) -> dict[str, Any]:
    """A whole item as plain Python values (numbers as Decimal), as boto3's resource layer reads it."""
    return {name: _DESERIALIZER.deserialize(value) for name, value in item.items()}
