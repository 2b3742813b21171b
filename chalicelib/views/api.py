"""Exact view counters, the routes side: queue views, answer counts."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import dynamo, queues, validation
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError, ValidationError
from chalicelib.core.settings import Settings
from chalicelib.views import keys as view_keys
from chalicelib.views.keys import View


def enqueue(sqs: Any, settings: Settings, views: list[View], sleep: Sleep | None = None) -> None:
    # A retried request cannot count twice (markers), so a partly sent batch is simply retried.
    url = queues.queue_url(sqs, settings.views_queue)
    entries = [{"Id": str(i), "MessageBody": view_keys.to_message(v)} for i, v in enumerate(views)]
    queues.send(sqs, url, entries, sleep)


def count(
    dynamodb: Any, settings: Settings, url: str, start_ms: int | None, end_ms: int | None, now_ms: int
) -> dict[str, Any]:
    """The URL's counter, or with start and/or end the markers of views in [start, end)."""
    if start_ms is None and end_ms is None:
        try:
            item = dynamodb.get_item(TableName=settings.counts_table, Key=view_keys.counter_key(url)).get("Item")
        except ClientError as exc:
            raise StorageError("could not read the view counter") from exc
        return {"url": url, "views": int(item["views"]["N"]) if item else 0}
    start = now_ms - settings.view_marker_ttl_seconds * 1000 if start_ms is None else start_ms
    end = now_ms if end_ms is None else end_ms
    if start >= end:
        raise ValidationError("start must be before end")
    low, high = view_keys.marker_range(start, end, settings.view_dedup)
    request: dict[str, Any] = {
        "TableName": settings.counts_table,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
        # A marker past its expiry may linger until DynamoDB deletes it: it no longer counts.
        "FilterExpression": "expires_at > :now",
        "ExpressionAttributeValues": {
            ":pk": {"S": view_keys.url_pk(url)},
            ":low": {"S": low},
            ":high": {"S": high},
            ":now": {"N": str(now_ms // 1000)},
        },
        "Select": "COUNT",
    }
    pages = dynamo.query_pages(dynamodb, request, "could not count the view markers")
    total = sum(int(page.get("Count", 0)) for page in pages)
    return {"url": url, "views": total, "start": validation.iso(start), "end": validation.iso(end)}
