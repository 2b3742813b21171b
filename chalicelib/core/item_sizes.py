"""How big DynamoDB counts an item in its JSON form, by its published rules (what a write is charged on). Pure.
docs/guarantees.md, "The item size limit, which bounds a pack"."""

from __future__ import annotations

from typing import Any


def number_size(text: str) -> int:
    """Leading and trailing zeros are not stored; the exponent is not counted."""
    mantissa = text.lower().split("e")[0].lstrip("+-").replace(".", "").strip("0")
    return (len(mantissa) + 1) // 2 + 1


def attribute_size(value: dict[str, Any]) -> int:
    ((kind, body),) = value.items()
    if kind == "S":
        return len(body.encode())
    if kind == "N":
        return number_size(body)
    if kind == "B":
        return len(body)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(attribute_size({kind[0]: member}) for member in body)
    if kind == "L":
        return 3 + sum(1 + attribute_size(v) for v in body)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + attribute_size(v) for k, v in body.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict[str, Any] | None) -> int:
    """0 for no item: what a write creating it or a read missing it is charged on."""
    return sum(len(name.encode()) + attribute_size(value) for name, value in (item or {}).items())
