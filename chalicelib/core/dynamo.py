"""DynamoDB helpers shared by the storage modules: paging, batch reads, retries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

from chalicelib.core import attributes, retry
from chalicelib.core.aws import DynamoDB
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError
from chalicelib.core.storage_errors import translated


def query_pages(dynamodb: DynamoDB, request: dict[str, Any], failure: str) -> Iterator[dict[str, Any]]:
    """Every page of a Query; a failed call becomes StorageError(failure)."""
    request = dict(request)
    while True:
        with translated(failure):
            page = dynamodb.query(**request)
        # A page is read where its items are turned into records; the stubs type each field.
        yield cast("dict[str, Any]", page)
        if "LastEvaluatedKey" not in page:
            return
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def query_sort_range(
    dynamodb: DynamoDB, table: str, pk: str, lo: str, hi: str, failure: str
) -> Iterator[dict[str, Any]]:
    """Every item of partition `pk` whose sort key lies in [lo, hi], paginated."""
    request = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
        "ExpressionAttributeValues": {":pk": {"S": pk}, ":lo": {"S": lo}, ":hi": {"S": hi}},
    }
    for page in query_pages(dynamodb, request, failure):
        yield from page.get("Items", [])


def stored_expiry(item: dict[str, Any] | None) -> int | None:
    """An item's `expires_at` (the table's TTL attribute), None for no item or none stored."""
    return None if item is None else attributes.optional_integer(item, "expires_at")


def batch_get_items(
    dynamodb: DynamoDB,
    table: str,
    keys: list[dict[str, Any]],
    failure: str,
    sleep: Sleep | None = None,
    attempts: int = 8,
    cap: float = 2.0,
    projection: str | None = None,
    consistent: bool = False,
) -> Iterator[dict[str, Any]]:
    """The items found for `keys`, 100 keys a call, unprocessed keys retried with backoff; a
    failed call, or keys still unprocessed after `attempts`, become StorageError(failure)."""
    for start in range(0, len(keys), 100):
        request: dict[str, Any] = {table: {"Keys": keys[start : start + 100]}}
        if projection:
            request[table]["ProjectionExpression"] = projection
        if consistent:
            request[table]["ConsistentRead"] = True
        for _ in retry.attempts(attempts, sleep, cap):
            with translated(failure):
                response = dynamodb.batch_get_item(RequestItems=request)
            yield from response.get("Responses", {}).get(table, [])
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
        else:
            raise StorageError(failure)


def put_items(
    dynamodb: DynamoDB,
    table: str,
    items: list[dict[str, Any]],
    failure: str,
    sleep: Sleep | None = None,
    attempts: int = 8,
    cap: float = 2.0,
) -> None:
    """Write whole items (plain puts: the same item written twice is the same), 25 a call,
    unprocessed items retried with backoff; what is still unwritten becomes StorageError(failure)."""
    for start in range(0, len(items), 25):
        requests: list[Any] = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        for _ in retry.attempts(attempts, sleep, cap):
            with translated(failure):
                response = dynamodb.batch_write_item(RequestItems={table: requests})
            requests = list(response.get("UnprocessedItems", {}).get(table, []))
            if not requests:
                break
        else:
            raise StorageError(failure)
