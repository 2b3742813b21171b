"""The daily salt of visitor ids (`SALT#` / `d#<day>`, sites.names): 32 random bytes per UTC day,
created by a conditional put (a concurrent creator's salt wins and is read back), ignored past
its expiry and deleted by the first page view of the next day. Why a salt lives two days and
never leaves the table: docs/tracker.md, "Privacy: what is collected and what is not".
"""

from __future__ import annotations

import secrets
import threading
import weakref
from collections.abc import Callable
from typing import Any

from chalicelib.core import attributes, times
from chalicelib.core.aws import DynamoDB
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated
from chalicelib.sites import names
from chalicelib.sites.privacy import SALT_BYTES

SALT_DAYS = 2  # a salt lives this many days from its day's start


def expires_at_s(day: int) -> int:
    return (day + SALT_DAYS) * times.DAY_MS // 1000


class _Cache:
    """Salts this process read, per DynamoDB client (a test's emulator starts afresh), each
    used only until its expiry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._salts: weakref.WeakKeyDictionary[Any, dict[int, bytes]] = weakref.WeakKeyDictionary()

    def get(self, client: Any, day: int) -> bytes | None:
        with self._lock:
            return self._salts.get(client, {}).get(day)

    def put(self, client: Any, day: int, salt: bytes, now_s: int) -> None:
        with self._lock:
            held = {d: s for d, s in self._salts.get(client, {}).items() if expires_at_s(d) > now_s}
            held[day] = salt
            self._salts[client] = held


_cache = _Cache()


def salt_for_day(
    dynamodb: DynamoDB,
    settings: Settings,
    day: int,
    now_ms: int,
    new_salt: Callable[[], bytes] = lambda: secrets.token_bytes(SALT_BYTES),
) -> bytes:
    """The salt of UTC day `day` (days since the epoch), created if the day has none yet.
    ValueError for a day whose salt has expired (or would be created already expired)."""
    now_s = now_ms // 1000
    if expires_at_s(day) <= now_s:
        raise ValueError("that day's salt is gone: its visitors can no longer be told apart")
    cached = _cache.get(dynamodb, day)
    if cached is not None:
        return cached
    salt = _read(dynamodb, settings, day, now_s)
    if salt is None:
        salt = _create(dynamodb, settings, day, now_s, new_salt())
    _cache.put(dynamodb, day, salt, now_s)
    return salt


def _read(dynamodb: DynamoDB, settings: Settings, day: int, now_s: int) -> bytes | None:
    with translated("could not read the day's salt"):
        item = dynamodb.get_item(TableName=settings.counts_table, Key=names.salt_key(day), ConsistentRead=True).get(
            "Item"
        )
    if item is None or attributes.integer(item, "expires_at") <= now_s:
        return None
    return attributes.binary(item, "salt")


def _delete_expired(dynamodb: DynamoDB, settings: Settings, day: int, now_s: int) -> None:
    """Delete an expired salt now rather than when TTL gets to it (DynamoDB deletes expired items
    only within days, docs/guarantees.md). Done by the first page view of each day; should it
    fail, the salt is still ignored by every read and TTL deletes it."""
    try:
        with translated("could not delete an expired salt"):
            dynamodb.delete_item(
                TableName=settings.counts_table,
                Key=names.salt_key(day),
                ConditionExpression="attribute_not_exists(pk) OR expires_at <= :now",
                ExpressionAttributeValues={":now": {"N": str(now_s)}},
            )
    except StorageError:
        pass


def _create(dynamodb: DynamoDB, settings: Settings, day: int, now_s: int, salt: bytes) -> bytes:
    try:
        with translated("could not store the day's salt"):
            dynamodb.put_item(
                TableName=settings.counts_table,
                Item={**names.salt_key(day), "salt": {"B": salt}, "expires_at": {"N": str(expires_at_s(day))}},
                # Another request may have created it meanwhile: its salt wins (read back below).
                ConditionExpression="attribute_not_exists(pk) OR expires_at <= :now",
                ExpressionAttributeValues={":now": {"N": str(now_s)}},
            )
    except ConditionFailed:
        pass
    else:
        _delete_expired(dynamodb, settings, day - SALT_DAYS, now_s)
        return salt
    stored = _read(dynamodb, settings, day, now_s)
    if stored is None:
        raise StorageError("the day's salt was neither created nor found")
    return stored
