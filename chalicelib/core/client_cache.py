"""The per-process cache of what was read: the beacon's (a site's settings, the day's salts, its keys) and the
bucket writes' hints (what an item last held); no I/O."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ClientCache(Generic[K, V]):
    """What this process read, per client (a DynamoDB client: a test's emulator starts afresh; or the
    cache's owner) and key, each used for `max_age_ms` after it was read; the least recently read key
    goes first past `max_keys`."""

    def __init__(self, max_keys: int, max_age_ms: int) -> None:
        self._lock = threading.Lock()
        self._max_keys, self._max_age_ms = max_keys, max_age_ms
        self._held: weakref.WeakKeyDictionary[Any, OrderedDict[K, tuple[int, V]]] = weakref.WeakKeyDictionary()

    def get(self, client: Any, key: K, now_ms: int) -> V | None:
        with self._lock:
            keys = self._held.get(client, OrderedDict())
            held = keys.get(key)
            if held is None or held[0] + self._max_age_ms <= now_ms:
                return None
            keys.move_to_end(key)
            return held[1]

    def put(self, client: Any, key: K, found: V, now_ms: int) -> None:
        with self._lock:
            held = self._held.setdefault(client, OrderedDict())
            held[key] = (now_ms, found)
            held.move_to_end(key)
            while len(held) > self._max_keys:
                held.popitem(last=False)

    def fetch(self, client: Any, key: K, now_ms: int, read: Callable[[], V]) -> V:
        """What `get` gives, else what `read` does, then held."""
        found = self.get(client, key, now_ms)
        if found is None:
            found = read()
            self.put(client, key, found, now_ms)
        return found

    def forget(self, client: Any, key: K) -> None:
        with self._lock:
            self._held.get(client, OrderedDict()).pop(key, None)
