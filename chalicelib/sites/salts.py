"""The daily salt of visitor ids, created once a UTC day and stored sealed under the stage's item key:
docs/tracker.md, "Privacy: what is collected and what is not"."""

from __future__ import annotations

import functools
import hmac
import secrets
from collections.abc import Callable
from contextlib import suppress
from hashlib import sha256

from chalicelib.core import attributes, dynamo, times
from chalicelib.core.aws import DynamoDB
from chalicelib.core.client_cache import ClientCache
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated
from chalicelib.sites import names
from chalicelib.sites.privacy import SALT_BYTES

SALT_DAYS = 2  # a salt lives this many days from its day's start
NONCE_BYTES = 16
TAG_BYTES = 32
# Item hashes key UTF-8 text, where the byte 0xFF never occurs: salts' keys cannot meet them.
_SALT_KEY_LABEL = b"\xffvisitor salts"


def _salt_key(item_key: bytes) -> bytes:
    return hmac.new(item_key, _SALT_KEY_LABEL, sha256).digest()


def _mac(key: bytes, label: bytes, day: int, nonce: bytes, sealed: bytes = b"") -> bytes:
    """The pad (`b"pad"`) or the tag (`b"tag"`, over the sealed salt too) of a day's nonce."""
    return hmac.new(key, label + day.to_bytes(8, "big") + nonce + sealed, sha256).digest()


def seal(item_key: bytes, day: int, salt: bytes) -> bytes:
    """The salt as stored: nonce | salt XOR HMAC(key, day, nonce) | HMAC tag over the rest."""
    key, nonce = _salt_key(item_key), secrets.token_bytes(NONCE_BYTES)
    sealed = bytes(a ^ b for a, b in zip(salt, _mac(key, b"pad", day, nonce)[:SALT_BYTES], strict=True))
    return nonce + sealed + _mac(key, b"tag", day, nonce, sealed)


def unseal(item_key: bytes, day: int, stored: bytes) -> bytes:
    """The salt `seal` stored for `day`; StorageError if it was not sealed for it under this key."""
    key = _salt_key(item_key)
    nonce, sealed, tag = stored[:NONCE_BYTES], stored[NONCE_BYTES:-TAG_BYTES], stored[-TAG_BYTES:]
    if len(sealed) != SALT_BYTES or not hmac.compare_digest(tag, _mac(key, b"tag", day, nonce, sealed)):
        raise StorageError("the day's salt does not open under the item key")
    return bytes(a ^ b for a, b in zip(sealed, _mac(key, b"pad", day, nonce)[:SALT_BYTES], strict=True))


def expires_at_s(day: int) -> int:
    return (day + SALT_DAYS) * times.DAY_MS // 1000


# The salts this process read: only a day's not yet expired is asked for (salt_for_day), and at
# most SALT_DAYS + 1 days have one (a beacon's day may be a day old, or a moment ahead).
_Cache = functools.partial(ClientCache[int, bytes], SALT_DAYS + 1, SALT_DAYS * times.DAY_MS)
_cache = _Cache()


def salt_for_day(
    dynamodb: DynamoDB,
    settings: Settings,
    item_key: bytes,
    day: int,
    now_ms: int,
    new_salt: Callable[[], bytes] = lambda: secrets.token_bytes(SALT_BYTES),
) -> bytes:
    """The salt of UTC day `day` (days since the epoch), created if the day has none yet.
    ValueError for a day whose salt has expired (or would be created already expired)."""
    now_s = now_ms // 1000
    if expires_at_s(day) <= now_s:
        raise ValueError("that day's salt is gone: its visitors can no longer be told apart")

    def read() -> bytes:
        stored = _read(dynamodb, settings, item_key, day, now_s)
        return _create(dynamodb, settings, item_key, day, now_s, new_salt()) if stored is None else stored

    return _cache.fetch(dynamodb, day, now_ms, read)


def _read(dynamodb: DynamoDB, settings: Settings, item_key: bytes, day: int, now_s: int) -> bytes | None:
    item = dynamo.get_item(dynamodb, settings.counts_table, names.salt_key(day), "could not read the day's salt")
    if item is None or attributes.integer(item, "expires_at") <= now_s:
        return None
    return unseal(item_key, day, attributes.binary(item, "sealed"))


def _delete_expired(dynamodb: DynamoDB, settings: Settings, day: int, now_s: int) -> None:
    """Delete an expired salt now rather than when TTL gets to it (docs/tracker.md, "Privacy");
    should it fail, every read ignores it and TTL deletes it."""
    with suppress(StorageError), translated("could not delete an expired salt"):
        dynamodb.delete_item(
            TableName=settings.counts_table,
            Key=names.salt_key(day),
            ConditionExpression="attribute_not_exists(pk) OR expires_at <= :now",
            ExpressionAttributeValues={":now": {"N": str(now_s)}},
        )


def _create(dynamodb: DynamoDB, settings: Settings, item_key: bytes, day: int, now_s: int, salt: bytes) -> bytes:
    try:
        with translated("could not store the day's salt"):
            dynamodb.put_item(
                TableName=settings.counts_table,
                Item={
                    **names.salt_key(day),
                    "sealed": {"B": seal(item_key, day, salt)},
                    "expires_at": {"N": str(expires_at_s(day))},
                },
                # Another request may have created it meanwhile: its salt wins (read back below).
                ConditionExpression="attribute_not_exists(pk) OR expires_at <= :now",
                ExpressionAttributeValues={":now": {"N": str(now_s)}},
            )
    except ConditionFailed:
        stored = _read(dynamodb, settings, item_key, day, now_s)
        if stored is None:
            raise StorageError("the day's salt was neither created nor found") from None
        return stored
    _delete_expired(dynamodb, settings, day - SALT_DAYS, now_s)
    return salt
