"""DynamoDB calls every storage module makes the same way (docs/design.md, "One way for each
mechanism"): Queries, single-item and batch reads, batch writes and the one optimistic put. Why a
version condition loses no write: docs/guarantees.md, "Read, then write on condition"."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import suppress
from typing import Any, TypeGuard, cast

from chalicelib.core import attributes, dynamo_limits, retry
from chalicelib.core.aws import DynamoDB
from chalicelib.core.clock import Sleep
from chalicelib.core.storage_errors import ConditionFailed, translated
from chalicelib.core.storage_errors import get_item as get_item

# The attribute every optimistically written item keeps its version in.
VERSION = "ver"


def query_request(
    table: str,
    pk: str,
    *,
    sk: str = "",
    values: Mapping[str, str] | None = None,
    limit: int | None = None,
    forward: bool = True,
    consistent: bool = False,
    projection: str | None = None,
    names: Mapping[str, str] | None = None,
    live_at_s: int | None = None,
    start_after: str | None = None,
    count: bool = False,
) -> dict[str, Any]:
    """A Query of partition `pk`: `sk` a condition on the sort key (its text values in `values`), at
    most `limit` a page, reversed unless `forward`, after sort key `start_after`; `names` the
    projection's placeholders; `live_at_s` leaves expired items out (TTL deletes late); `count`."""
    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk" + (f" AND {sk}" if sk else ""),
        "ExpressionAttributeValues": {":pk": {"S": pk}, **{k: {"S": v} for k, v in (values or {}).items()}},
        "ScanIndexForward": forward,
        "ConsistentRead": consistent,
    }
    if limit is not None:
        request["Limit"] = limit
    if projection:
        request["ProjectionExpression"] = projection
    if names:
        request["ExpressionAttributeNames"] = dict(names)
    if count:
        request["Select"] = "COUNT"
    if live_at_s is not None:
        request["FilterExpression"] = "attribute_not_exists(expires_at) OR expires_at > :now"
        request["ExpressionAttributeValues"][":now"] = {"N": str(live_at_s)}
    if start_after is not None:
        request["ExclusiveStartKey"] = {"pk": {"S": pk}, "sk": {"S": start_after}}
    return request


def query_items(
    dynamodb: DynamoDB, request: dict[str, Any], failure: str, most: int | None = None
) -> list[dict[str, Any]]:
    """The items of every page of a Query (the first `most` of them, reading no further)."""
    items: list[dict[str, Any]] = []
    for page in query_pages(dynamodb, request, failure):
        items += page.get("Items", [])
        if most is not None and len(items) >= most:
            return items[:most]
    return items


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


def query_sort_range(dynamodb: DynamoDB, table: str, pk: str, lo: str, hi: str, failure: str) -> list[dict[str, Any]]:
    """Every item of partition `pk` whose sort key lies in [lo, hi], paginated."""
    request = query_request(table, pk, sk="sk BETWEEN :lo AND :hi", values={":lo": lo, ":hi": hi})
    return query_items(dynamodb, request, failure)


def stored_expiry(item: dict[str, Any] | None) -> int | None:
    """An item's `expires_at` (the table's TTL attribute), None for no item or none stored."""
    return None if item is None else attributes.optional_integer(item, "expires_at")


def live(item: dict[str, Any] | None, now_s: int) -> TypeGuard[dict[str, Any]]:
    """Whether an item is there and not past its `expires_at` (docs/guarantees.md, "TTL deletes late")."""
    expiry = stored_expiry(item)
    return item is not None and (expiry is None or expiry > now_s)


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
    """The items found for `keys`, BATCH_GET_KEYS a call, unprocessed keys retried with backoff; a
    failed call, or keys still unprocessed after `attempts`, become StorageError(failure)."""
    found: list[dict[str, Any]] = []

    def get(request: dict[str, Any]) -> dict[str, Any]:
        response = dynamodb.batch_get_item(RequestItems=request)
        found.extend(response.get("Responses", {}).get(table, []))
        return dict(response.get("UnprocessedKeys") or {})

    for start in range(0, len(keys), dynamo_limits.BATCH_GET_KEYS):
        request: dict[str, Any] = {table: {"Keys": keys[start : start + dynamo_limits.BATCH_GET_KEYS]}}
        if projection:
            request[table]["ProjectionExpression"] = projection
        if consistent:
            request[table]["ConsistentRead"] = True
        found.clear()
        retry.until_done(get, request, failure, attempts, sleep, cap)
        yield from found


def put_items(
    dynamodb: DynamoDB, table: str, items: list[dict[str, Any]], failure: str, sleep: Sleep | None = None
) -> None:
    """Write whole items (plain puts: the same item written twice is the same), BATCH_WRITE_REQUESTS a call,
    unprocessed items retried with backoff; what is still unwritten becomes StorageError(failure)."""

    def write(requests: list[Any]) -> list[Any]:
        response = dynamodb.batch_write_item(RequestItems={table: requests})
        return list(response.get("UnprocessedItems", {}).get(table, []))

    for start in range(0, len(items), dynamo_limits.BATCH_WRITE_REQUESTS):
        batch = items[start : start + dynamo_limits.BATCH_WRITE_REQUESTS]
        retry.until_done(write, [{"PutRequest": {"Item": item}} for item in batch], failure, 8, sleep, 2.0)


def move_forward(
    dynamodb: DynamoDB,
    table: str,
    key: dict[str, Any],
    name: str,
    to: dict[str, str],
    expires: int | None,
    failure: str,
) -> None:
    """SET attribute `name` to `to` (and expires_at to `expires`, epoch s, when given) if it is absent
    or smaller; a failed condition means a writer that knew better got there first: nothing to do."""
    expiry = {} if expires is None else {":exp": {"N": str(expires)}}
    with suppress(ConditionFailed), translated(failure):
        dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #m = :to" + (", expires_at = :exp" if expiry else ""),
            ConditionExpression="attribute_not_exists(#m) OR #m < :to",
            ExpressionAttributeNames={"#m": name},
            ExpressionAttributeValues={":to": to, **expiry},
        )


def put_versioned(dynamodb: DynamoDB, table: str, item: dict[str, Any], version: int | None, failure: str) -> None:
    """Write `item` with VERSION one past `version`, on condition that the stored item is still at
    `version`; ConditionFailed when another writer got there first: read again, merge, retry."""
    item = {**item, VERSION: {"N": str((version or 0) + 1)}}
    with translated(failure):
        dynamodb.put_item(TableName=table, Item=item, **versioned_condition(version))


def versioned_condition(version: int | None) -> dict[str, Any]:
    """The condition that an item is still at VERSION `version` as read (None or 0: that there is
    no item yet), for put_versioned and for a transaction's Put."""
    if not version:
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    return {
        "ConditionExpression": "#ver = :ver",
        "ExpressionAttributeNames": {"#ver": VERSION},
        "ExpressionAttributeValues": {":ver": {"N": str(version)}},
    }


def stored_version(item: dict[str, Any] | None) -> int:
    """The VERSION of an item as read (0 for none)."""
    return 0 if item is None else attributes.integer(item, VERSION, 0)
