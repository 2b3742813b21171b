"""The one retry loop for what the SDK does not retry, and the one pause before each retry: docs/design.md,
"Retries"."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import TypeVar

from chalicelib.core import clock
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError
from chalicelib.core.storage_errors import translated

T = TypeVar("T")


def pause(attempt: int, sleep: Sleep | None = None, cap: float = 2.0) -> None:
    """Wait before retry number `attempt` (from 0), at most `cap`: docs/design.md, "Retries"."""
    step = min(0.05 * 2.0**attempt, cap)
    (sleep or clock.sleep)(step / 2 + random.uniform(0, step / 2))


def attempts(count: int, sleep: Sleep | None = None, cap: float = 2.0) -> Iterator[int]:
    """Attempt numbers 0..count-1, pausing before each but the first; the caller stops when one
    succeeds and says what running out means (`for ... else`)."""
    for attempt in range(count):
        if attempt:
            pause(attempt - 1, sleep, cap)
        yield attempt


def until_done(send: Callable[[T], T], pending: T, failure: str, count: int, sleep: Sleep | None, cap: float) -> None:
    """Send `pending`, then what `send` returns as left over, pausing before each retry; a failed
    call, or something left after `count` sends, become StorageError(failure)."""
    for _ in attempts(count, sleep, cap):
        with translated(failure):
            pending = send(pending)
        if not pending:
            return
    raise StorageError(failure)
