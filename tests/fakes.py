"""The shared fake: a real (moto) client with some of its methods replaced.

Tests make storage fail, hold back, record or die half-way by replacing the one method that
matters and passing every other call to the real client, the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

WRITES = ("update_item", "put_item", "transact_write_items")


class Killed(BaseException):
    """The handler's process ends (timeout, crash): not an exception the handler can see."""


class Forwarding:
    """The base of a test's own race simulator: the methods its subclass defines stand in for
    `real`'s (each playing the test's scenario before the real call); every other attribute is
    `real`'s."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


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


def checking(real: Any, method: str, check: Callable[[dict[str, Any]], None]) -> Patched:
    """`method` first shows its keyword arguments to `check`, which may raise, then runs as usual."""

    def call(**kwargs: Any) -> Any:
        check(kwargs)
        return getattr(real, method)(**kwargs)

    return Patched(real, **{method: call})


def failing(real: Any, method: str, code: str, when: Callable[[dict[str, Any]], bool] = lambda _: True) -> Patched:
    """`method` answers DynamoDB's error `code` for the calls `when` picks (every call by default)."""
    from botocore.exceptions import ClientError

    def refuse(kwargs: dict[str, Any]) -> None:
        if when(kwargs):
            raise ClientError({"Error": {"Code": code, "Message": code}}, method)

    return checking(real, method, refuse)


class Dying(Patched):
    """`real` whose process ends before (or, with `after`, right after) its `die_on`-th call of
    any of `methods` (the writes by default): `death` is raised, which no handler catches."""

    def __init__(
        self,
        real: Any,
        die_on: int,
        after: bool = False,
        methods: Sequence[str] = WRITES,
        death: type[BaseException] = Killed,
    ) -> None:
        self.calls = 0

        def dying(name: str) -> Callable[..., Any]:
            method = getattr(real, name)

            def call(**kwargs: Any) -> Any:
                self.calls += 1
                if self.calls == die_on and not after:
                    raise death
                response = method(**kwargs)
                if self.calls == die_on:
                    raise death  # written, but the handler never reports success
                return response

            return call

        super().__init__(real, **{name: dying(name) for name in methods})
