"""The views tests' one fixture: each test finds its queues afresh (a new moto per test)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chalicelib.core import queues


@pytest.fixture(autouse=True)
def fresh_queue_cache() -> Iterator[None]:
    queues.queue_url.cache_clear()
    queues.dead_letter_url.cache_clear()
    yield
