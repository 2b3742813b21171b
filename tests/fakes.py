"""The shared fake: a real (moto) client with some of its methods replaced.

Tests make storage fail, hold back, record or die half-way by replacing the one method that
matters and passing every other call to the real client, the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Patched:
    """`real` with `methods` in place of its own (by name); every other attribute is `real`'s."""

    def __init__(self, real: Any, **methods: Callable[..., Any]) -> None:
        self._real = real
        self._methods = methods

    def __getattr__(self, name: str) -> Any:
        return self._methods.get(name) or getattr(self._real, name)


def unprocessed_writes(real: Any, stuck: int, times: int) -> Patched:
    """BatchWriteItem leaves the last `stuck` items of each call unprocessed, `times` times."""
    left_to_fail = [times]

    def batch_write_item(RequestItems: dict[str, Any]) -> Any:
        ((table, requests),) = RequestItems.items()
        if left_to_fail[0] == 0:
            return real.batch_write_item(RequestItems=RequestItems)
        left_to_fail[0] -= 1
        done, left = requests[:-stuck], requests[-stuck:]
        if done:
            real.batch_write_item(RequestItems={table: done})
        return {"UnprocessedItems": {table: left}}

    return Patched(real, batch_write_item=batch_write_item)


def recording(real: Any, method: str, calls: list[dict[str, Any]]) -> Patched:
    """`method` records the keyword arguments of each call in `calls`, then runs as usual."""

    def record(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return getattr(real, method)(**kwargs)

    return Patched(real, **{method: record})
