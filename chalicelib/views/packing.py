"""Packing per-URL groups of view markers into TransactWriteItems of at most 100 items. Pure."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

M = TypeVar("M")


def chunks(
    groups: Iterable[tuple[str, list[M]]], max_items: int, spans: Callable[[M], Iterable[Hashable]]
) -> list[list[tuple[str, list[M]]]]:
    """Pack per-URL groups of markers into transactions of at most max_items items.

    A group of k markers costs k + 1 + b items: its markers, one counter update and one update
    per distinct bucket (`spans`) of those markers. A group too large for one transaction is
    split, each part bringing its own counter and bucket updates. Members are taken in the
    order given (sorted by time, a group's markers share few buckets).
    """
    result: list[list[tuple[str, list[M]]]] = []
    current: list[tuple[str, list[M]]] = []
    size = 0
    for key, members in groups:
        part: list[M] = []
        taken: set[Hashable] = set()
        for member in members:
            mine = set(spans(member))
            cost = 1 + len(mine - taken) + (0 if part else 1)
            if size + cost > max_items:
                if part:
                    current.append((key, part))
                if current:
                    result.append(current)
                current, size, part, taken = [], 0, [], set()
                cost = 2 + len(mine)
                if cost > max_items:
                    raise ValueError(f"one marker needs {cost} items, more than {max_items}")
            part.append(member)
            taken |= mine
            size += cost
        if part:
            current.append((key, part))
    if current:
        result.append(current)
    return result


def transaction_items(chunk: list[tuple[str, list[M]]], spans: Callable[[M], Iterable[Hashable]]) -> int:
    """How many items `chunks` counts for a transaction of these groups."""
    return sum(len(members) + 1 + len({s for m in members for s in spans(m)}) for _, members in chunk)
