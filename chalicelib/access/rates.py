"""Each key's request rate: a free allowance per process (`Allowances`), then a conditional count (`admit`):
docs/access.md, "Limits per key"; docs/guarantees.md, "A key's request rate"."""

from __future__ import annotations

import threading
import weakref

from chalicelib.core import keyspace
from chalicelib.core.aws import DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated

# Requests of one key a process admits in a second without writing (docs/access.md, "Limits per key").
ALLOWANCE = 1
# An item outlives its second by this much, then TTL deletes it (nothing reads an old one).
ITEM_TTL_SECONDS = 120
# What a key over its rate is told: its count is per second, and the next second starts within one.
RETRY_AFTER_SECONDS = 1


class Allowances:
    """What each key took of its allowance in this process's current second, per DynamoDB client
    (a Lambda process has one; a test with its own emulator starts afresh)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken: weakref.WeakKeyDictionary[DynamoDB, tuple[int, dict[str, int]]] = weakref.WeakKeyDictionary()

    def take(self, client: DynamoDB, key_id: str, second: int) -> bool:
        """True when the key has allowance left in `second`, which it then takes. A second earlier
        than the one held (the clock stepped back) gets none: its allowance may be spent already."""
        with self._lock:
            held, taken = self._taken.get(client, (second, {}))
            if second > held:
                held, taken = second, {}
            if second < held or taken.get(key_id, 0) >= ALLOWANCE:
                return False
            taken[key_id] = taken.get(key_id, 0) + 1
            self._taken[client] = (second, taken)
            return True

    def clear(self) -> None:
        """What a new process starts with."""
        with self._lock:
            self._taken.clear()


allowances = Allowances()


def admit(dynamodb: DynamoDB, settings: Settings, key_id: str, rate_per_second: int, now_ms: int) -> bool:
    """Admit one request of the key: from this process's allowance, else counted in the key's second;
    False (nothing counted) when that second is full. StorageError when the count cannot be written."""
    second = now_ms // 1000
    if allowances.take(dynamodb, key_id, second):
        return True
    try:
        with translated("could not check the key's request rate"):
            dynamodb.update_item(
                TableName=settings.counts_table,
                Key={"pk": {"S": keyspace.KEY_RATE + key_id}, "sk": {"S": keyspace.index_sort_key("s", second)}},
                UpdateExpression="ADD n :one SET expires_at = if_not_exists(expires_at, :expires)",
                ConditionExpression="attribute_not_exists(n) OR n < :rate",
                ExpressionAttributeValues={
                    ":one": {"N": "1"},
                    ":rate": {"N": str(rate_per_second)},
                    ":expires": {"N": str(second + 1 + ITEM_TTL_SECONDS)},
                },
            )
    except ConditionFailed:
        return False
    return True
