"""The daily salt of visitor ids in the counts table: created on a day's first use, the same all
day, another the next day, expired two days after its day starts, and ignored once expired."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.core import keyspace, times
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.sites import names, salts
from tests.conftest import ITEM_KEY
from tests.functional.helpers import partition

SETTINGS = Settings()
DAY = 20_500
NOON = DAY * times.DAY_MS + 12 * times.HOUR_MS
KEY = ITEM_KEY.encode()


def fresh(n: int) -> Any:
    return lambda: bytes([n]) * 32


def store_sealed(aws: Any, key: bytes, salt: bytes) -> None:
    """DAY's salt as another process would have stored it, sealed under `key`."""
    item = {**names.salt_key(DAY), "sealed": {"B": salts.seal(key, DAY, salt)}}
    aws.dynamodb.put_item(
        TableName=SETTINGS.counts_table, Item={**item, "expires_at": {"N": str(salts.expires_at_s(DAY))}}
    )


def test_given_no_salt_when_a_day_is_first_used_then_one_is_created_and_kept_all_day(aws: Any) -> None:
    first = salts.salt_for_day(aws.dynamodb, SETTINGS, KEY, DAY, NOON, fresh(1))
    salts._cache = salts._Cache()  # another process: reads what the first stored
    again = salts.salt_for_day(aws.dynamodb, SETTINGS, KEY, DAY, NOON + 11 * times.HOUR_MS, fresh(2))
    assert first == again == bytes([1]) * 32
    (item,) = partition(aws.dynamodb, keyspace.SALT)
    assert int(item["expires_at"]["N"]) == (DAY + 2) * 86400


def test_given_a_days_salt_when_stored_then_the_table_holds_it_only_sealed_under_the_item_key(aws: Any) -> None:
    salt = salts.salt_for_day(aws.dynamodb, SETTINGS, KEY, DAY, NOON)
    (item,) = partition(aws.dynamodb, keyspace.SALT)
    stored = b"".join(bytes(value["B"]) for value in item.values() if "B" in value)
    # Nothing read from the table holds the salt, nor half of it.
    assert salt[:16] not in stored and salt[16:] not in stored
    assert salts.unseal(KEY, DAY, bytes(item["sealed"]["B"])) == salt
    with pytest.raises(StorageError):
        salts.unseal(b"another key of at least 32 bytes!", DAY, bytes(item["sealed"]["B"]))
    with pytest.raises(StorageError):
        salts.unseal(KEY, DAY + 1, bytes(item["sealed"]["B"]))  # sealed for its own day only


def test_given_a_salt_sealed_under_another_key_when_read_then_refused_not_used(aws: Any) -> None:
    other = b"a replaced item key, 32+ bytes long"
    store_sealed(aws, other, bytes([7]) * 32)
    salts._cache = salts._Cache()
    with pytest.raises(StorageError):
        salts.salt_for_day(aws.dynamodb, SETTINGS, KEY, DAY, NOON)


def test_given_two_days_when_salted_then_each_day_has_its_own_random_salt(aws: Any) -> None:
    today = salts.salt_for_day(aws.dynamodb, SETTINGS, KEY, DAY, NOON)
    tomorrow = salts.salt_for_day(aws.dynamodb, SETTINGS, KEY, DAY + 1, NOON + times.DAY_MS)
    assert today != tomorrow and len(today) == len(tomorrow) == 32


def test_given_a_concurrent_creator_when_the_put_loses_then_the_stored_salt_wins(aws: Any) -> None:
    store_sealed(aws, KEY, bytes([7]) * 32)
    salts._cache = salts._Cache()
    assert salts._create(aws.dynamodb, SETTINGS, KEY, DAY, NOON // 1000, bytes([9]) * 32) == bytes([7]) * 32


def test_given_an_expired_salt_not_yet_deleted_when_read_then_it_is_ignored_and_replaced(aws: Any) -> None:
    # DynamoDB's TTL deletes only eventually: an item past its expiry may still be read.
    aws.dynamodb.put_item(
        TableName=SETTINGS.counts_table,
        Item={
            **names.salt_key(DAY),
            "sealed": {"B": salts.seal(KEY, DAY, bytes([7]) * 32)},
            "expires_at": {"N": str(NOON // 1000)},
        },
    )
    salts._cache = salts._Cache()
    assert salts.salt_for_day(aws.dynamodb, SETTINGS, KEY, DAY, NOON + 1000, fresh(3)) == bytes([3]) * 32


def test_given_a_day_past_its_two_days_when_asked_then_refused(aws: Any) -> None:
    with pytest.raises(ValueError):
        salts.salt_for_day(aws.dynamodb, SETTINGS, KEY, DAY - 2, NOON)
    assert partition(aws.dynamodb, keyspace.SALT) == []


def test_given_a_new_days_salt_when_created_then_the_salt_that_just_expired_is_deleted(aws: Any) -> None:
    salts.salt_for_day(aws.dynamodb, SETTINGS, KEY, DAY, NOON)
    salts.salt_for_day(aws.dynamodb, SETTINGS, KEY, DAY + 1, NOON + times.DAY_MS)
    assert len(partition(aws.dynamodb, keyspace.SALT)) == 2
    # Two days after DAY starts its salt has expired; the first page view of DAY + 2 deletes it.
    salts.salt_for_day(aws.dynamodb, SETTINGS, KEY, DAY + 2, NOON + 2 * times.DAY_MS)
    left = sorted(item["sk"]["S"] for item in partition(aws.dynamodb, keyspace.SALT))
    assert left == [names.salt_key(DAY + 1)["sk"]["S"], names.salt_key(DAY + 2)["sk"]["S"]]
