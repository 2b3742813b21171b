"""Helpers the functional tests share: sending through the API as a client would."""

from __future__ import annotations

import json
from typing import Any

from chalicelib.core.dynamo import query_pages
from chalicelib.core.settings import Settings


def post_events(client: Any, events: list[dict[str, Any]], per_request: int = 25) -> None:
    """POST events in batches of `per_request` (25: the API's limit; a batch is stored as one
    pack, a single event as one item of the one-event layout); every batch must be stored."""
    for start in range(0, len(events), per_request):
        response = client.http.post(
            "/events",
            headers={"Content-Type": "application/json"},
            body=json.dumps({"events": events[start : start + per_request]}),
        )
        assert response.status_code == 201, response.body


def invoke(client: Any, function: str, event: dict[str, Any]) -> Any:
    """Run a background handler the one way the tests do: as Lambda would, through Chalice's test
    client (the handler's middleware included), with a Lambda-shaped event; its return value."""
    return client.lambda_.invoke(function, event).payload


def partition(dynamodb: Any, pk: str) -> list[dict[str, Any]]:
    """Every item stored under one partition key of the counts table (a consistent Query)."""
    request = {
        "TableName": Settings().counts_table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": pk}},
        "ConsistentRead": True,
    }
    return [item for page in query_pages(dynamodb, request, "could not read the table") for item in page["Items"]]


def every_page(client: Any, path: str, field: str, limit: int) -> tuple[list[Any], int]:
    """Follow `next` from the first page; the entries and the number of pages read."""
    entries: list[Any] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = f"limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        response = client.http.get(f"{path}{'&' if '?' in path else '?'}{query}")
        assert response.status_code == 200, (path, response.body)
        body = response.json_body
        pages += 1
        assert len(body[field]) <= limit
        entries += body[field]
        cursor = body["next"]
        if cursor is None:
            return entries, pages


def account(dynamodb: Any, events_pk: str, now_ms: int, applied: int = 0, set_aside: int = 0, expired: int = 0) -> None:
    """Add to an events partition's audit item what the counting path writes for it
    (counters/audit_keys.py): the stream handler's own writing of it is not part of this tree."""
    from chalicelib.counters import audit_keys

    dynamodb.update_item(
        TableName=Settings().counts_table,
        Key=audit_keys.tally_key(events_pk),
        UpdateExpression="ADD #a :a, #s :s, #e :e SET expires_at = :exp",
        ExpressionAttributeNames={"#a": audit_keys.APPLIED, "#s": audit_keys.SET_ASIDE, "#e": audit_keys.EXPIRED},
        ExpressionAttributeValues={
            ":a": {"N": str(applied)},
            ":s": {"N": str(set_aside)},
            ":e": {"N": str(expired)},
            ":exp": {"N": str(now_ms // 1000 + audit_keys.AUDIT_TALLY_TTL_SECONDS)},
        },
    )


def bucket_counts(items: list[dict[str, Any]]) -> dict[str, int]:
    """Per bucket sort key of one counter (or filter), its count as a read sees it: a day's `n`;
    an hour's `n` plus the minutes its day item holds inline (counters/keys.py). An hour whose
    every event its day holds inline has no item, and is listed all the same."""
    from chalicelib.counters import keys as counter_keys

    counts: dict[str, int] = {}
    for item in items:
        sk = item["sk"]["S"]
        counts[sk] = counts.get(sk, 0) + int(item["n"]["N"])
        if sk.startswith("d#"):
            day = int(sk.split("#")[1])
            for minute, k in counter_keys.inline_minutes(item).items():
                hour = f"h#{day * 24 + minute // 60:010d}"
                counts[hour] = counts.get(hour, 0) + k
    return counts
