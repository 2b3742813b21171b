"""Each key's request rate: a count of its requests per second in the counts table.

Every request with a key writes once, before anything else: an UpdateItem that adds one to the
key's item of the current second (`RATE#<key id>` / `s#<second>`) on condition that it holds
fewer than the key's `rate_per_second`. The condition failing is the answer "over the rate"
(429 with Retry-After); DynamoDB evaluates the condition and the update as one atomic step, so
every Lambda instance shares the same count and no more than the rate is admitted in a second.
Keys have their own items, so one key's flood leaves other keys' counts alone. Why this holds on
AWS and what it costs: docs/access.md, "Limits per key"; docs/guarantees.md, "A key's request rate".
"""

from __future__ import annotations

from chalicelib.core import keyspace
from chalicelib.core.aws import DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated

WINDOW_SECONDS = 1
# An item outlives its second by this much, then TTL deletes it (nothing reads an old one).
ITEM_TTL_SECONDS = 120


def admit(dynamodb: DynamoDB, settings: Settings, key_id: str, rate_per_second: int, now_ms: int) -> bool:
    """Count one request of the key; False (and nothing counted) when its second is full.
    StorageError when the count cannot be written (the request is then refused with 503)."""
    second = now_ms // 1000 // WINDOW_SECONDS
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
                    ":expires": {"N": str((second + 1) * WINDOW_SECONDS + ITEM_TTL_SECONDS)},
                },
            )
    except ConditionFailed:
        return False
    return True


def retry_after_seconds(now_ms: int) -> int:
    """Whole seconds until the next window starts (what Retry-After says)."""
    window_ms = WINDOW_SECONDS * 1000
    return max(1, -(-(window_ms - now_ms % window_ms) // 1000))
