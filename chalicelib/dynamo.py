"""DynamoDB helpers shared by the storage modules: paging, batch reads, retries."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from botocore.exceptions import ClientError

from chalicelib.errors import StorageError
from chalicelib.retry import backoff

# Cancellation reasons that say "try again", not "this item is wrong".
RETRYABLE_CANCELLATIONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)


def cancellation_reasons(exc: ClientError) -> list[str] | None:
    """Per-item codes of a cancelled transaction, in item order ("None" for an item that was
    fine), or None when the error is not a cancellation."""
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return None
    return [r.get("Code") or "None" for r in exc.response.get("CancellationReasons", [])]


def query_pages(dynamodb: Any, request: dict[str, Any], failure: str) -> Iterator[dict[str, Any]]:
    """Every page of a Query; a failed call becomes StorageError(failure)."""
    request = dict(request)
    while True:
        try:
            page = dynamodb.query(**request)
        except ClientError as exc:
            raise StorageError(failure) from exc
        yield page
        if "LastEvaluatedKey" not in page:
            return
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def batch_get_items(
    dynamodb: Any,
    table: str,
    keys: list[dict[str, Any]],
    failure: str,
    sleep: Callable[[float], None],
    attempts: int = 8,
    cap: float = 2.0,
    projection: str | None = None,
) -> Iterator[dict[str, Any]]:
    """The items found for `keys`, 100 keys a call, unprocessed keys retried with backoff; a
    failed call, or keys still unprocessed after `attempts`, become StorageError(failure)."""
    for start in range(0, len(keys), 100):
        request: dict[str, Any] = {table: {"Keys": keys[start : start + 100]}}
        if projection:
            request[table]["ProjectionExpression"] = projection
        for attempt in range(attempts):
            try:
                response = dynamodb.batch_get_item(RequestItems=request)
            except ClientError as exc:
                raise StorageError(failure) from exc
            yield from response.get("Responses", {}).get(table, [])
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            sleep(backoff(attempt, cap))
        else:
            raise StorageError(failure)
