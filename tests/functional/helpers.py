"""Helpers the functional tests share: sending through the API as a client would, running the
handlers as Lambda would, reading back what is stored. Test modules import from here (or
stream_fixtures, site_helpers, work_meter, tests/fakes.py), never from each other."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from chalicelib.core.dynamo import query_pages
from chalicelib.core.settings import Settings

SETTINGS = Settings()
MINUTE = 60_000
API_REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "api.md"
TABLE_ROW = re.compile(r"^\| (GET|POST|PUT|DELETE|PATCH) \| `([^`]+)` \|", re.MULTILINE)
# A report run reports events ingested before now - settle delay: this much later, they are in.
REPORT_SETTLE = SETTINGS.report_settle_seconds * 1000 + 1000


def get(client: Any, path: str, status: int = 200) -> Any:
    response = client.http.get(path)
    assert response.status_code == status, (path, response.body)
    return response


def post_json(client: Any, path: str, body: Any = None) -> Any:
    return client.http.post(path, headers={"Content-Type": "application/json"}, body=json.dumps(body or {}))


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


def accounts(dynamodb: Any, events_pk: str) -> dict[str, int]:
    """Every number the audit items hold of one events partition (counters/audit_items.py)."""
    from chalicelib.counters import audit_runs

    return audit_runs.accounted(dynamodb, Settings(), events_pk)


def account(dynamodb: Any, events_pk: str, now_ms: int, applied: int = 0, set_aside: int = 0, expired: int = 0) -> None:
    """Add to an events partition's numbers, on an audit item of its quarter hour of a stream
    shard of its own (counters/audit_items.py), what the counting path would have written for it."""
    from chalicelib.counters import audit_items, layout

    dynamodb.update_item(
        TableName=Settings().counts_table,
        Key=audit_items.shard_item_key(events_pk, layout.shard_attribute("shardId-accounted-aside")),
        UpdateExpression="ADD #a :a, #s :s, #e :e SET expires_at = :exp",
        ExpressionAttributeNames={
            "#a": audit_items.attribute(audit_items.APPLIED, events_pk),
            "#s": audit_items.attribute(audit_items.SET_ASIDE, events_pk),
            "#e": audit_items.attribute(audit_items.EXPIRED, events_pk),
        },
        ExpressionAttributeValues={
            ":a": {"N": str(applied)},
            ":s": {"N": str(set_aside)},
            ":e": {"N": str(expired)},
            ":exp": {"N": str(now_ms // 1000 + audit_items.AUDIT_TALLY_TTL_SECONDS)},
        },
    )


def declared_routes(app: Any) -> set[tuple[str, str]]:
    """Every route but the CORS preflights, which app.py declares for every path at once."""
    return {(method, path) for path, entries in app.routes.items() for method in entries if method != "OPTIONS"}


# -- the audit ----------------------------------------------------------------------------------


def settle(clock: Any) -> None:
    """Move the clock past the end of the current quarter hour and the audit's settle margin."""
    from chalicelib.counters import audit

    end = clock.now - clock.now % audit.QUARTER_MS + audit.QUARTER_MS
    clock.now = end + SETTINGS.audit_settle_minutes * MINUTE + MINUTE


def start_audit(client: Any) -> None:
    """The first run: it sets the checkpoint at the last settled quarter hour, compares nothing."""
    first = post_json(client, "/audit").json_body
    assert (first["audited"], first["short"], first["superseded"]) == (0, [], False)
    assert first["checkpoint"] is not None


# -- reports ------------------------------------------------------------------------------------


def run_now(client: Any) -> Any:
    return client.http.post("/reports", headers={"Content-Type": "application/json"}, body="{}")


def all_reports(aws: Any) -> list[dict[str, Any]]:
    """Every committed report, oldest first, read back the way clients read them."""
    from chalicelib.reports import api as reports_api

    listed = reports_api.list_reports(aws.dynamodb, SETTINGS, {"limit": "1000"})["reports"]
    return [reports_api.get_report(aws.dynamodb, aws.s3, SETTINGS, r["id"]) for r in reversed(listed)]


def assert_each_event_once(found: list[dict[str, Any]], expected: dict[str, int]) -> None:
    """Each event has its own counter and amount: it must show up in exactly one report."""
    seen: dict[str, int] = {}
    for report in found:
        assert report["events"] == sum(c["events"] for c in report["counters"].values())
        for name, totals in report["counters"].items():
            assert name not in seen, f"{name} is in two reports"
            assert totals["events"] == 1
            seen[name] = totals["sums"]["amount"]
    assert seen == expected
    for earlier, later in zip(found, found[1:]):
        assert earlier["end"] == later["start"], "reports must tile time: no gap, no overlap"


# -- views: the queue and its handler -----------------------------------------------------------


def deliver_views(aws: Any, views: list[Any], now_ms: int) -> None:
    """Apply `views` (views.validation.View) as one batch of the views handler, without the queue."""
    from chalicelib.core.queues import Message
    from chalicelib.views import batches as views_batches
    from chalicelib.views.messages import to_message

    messages = [Message(str(i), f"r{i}", to_message(v)) for i, v in enumerate(views)]
    views_batches.apply_messages(aws.dynamodb, aws.sqs, SETTINGS, messages, now_ms)


def queue_url(aws: Any, name: str = SETTINGS.views_queue) -> str:
    return str(aws.sqs.get_queue_url(QueueName=name)["QueueUrl"])


def receive_all(aws: Any, name: str = SETTINGS.views_queue) -> list[dict[str, Any]]:
    """Every visible message, received once (as Lambda's poller does) and hidden for SQS's longest
    visibility timeout, 12 hours: a loaded machine taking a minute to receive them all must not
    receive the first ones again."""
    found: list[dict[str, Any]] = []
    while True:
        batch = aws.sqs.receive_message(
            QueueUrl=queue_url(aws, name),
            MaxNumberOfMessages=10,
            VisibilityTimeout=43_200,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not batch:
            return found
        found.extend(batch)


def sqs_event(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The Lambda event of SQS messages as received."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "eventSource": "aws:sqs",
            }
            for m in messages
        ]
    }


def deliver(client: Any, messages: list[dict[str, Any]]) -> Any:
    """Run the views handler on received queue messages."""
    return invoke(client, "on_view_messages", sqs_event(messages))


def post_all(client: Any, bodies: list[dict[str, Any]]) -> None:
    """POST view bodies in requests of 25; every request must be queued."""
    for start in range(0, len(bodies), 25):
        response = client.http.post(
            "/views",
            headers={"Content-Type": "application/json"},
            body=json.dumps({"views": bodies[start : start + 25]}),
        )
        assert response.status_code == 202, response.body


def bucket_counts(items: list[dict[str, Any]]) -> dict[str, int]:
    """Per bucket sort key of one counter (or filter), its count as a read sees it: a day's `n`;
    an hour's `n` plus the minutes its day item holds inline (counters/layout.py). An hour whose
    every event its day holds inline has no item, and is listed all the same."""
    from chalicelib.counters import layout

    counts: dict[str, int] = {}
    for item in items:
        sk = item["sk"]["S"]
        counts[sk] = counts.get(sk, 0) + int(item["n"]["N"])
        if sk.startswith("d#"):
            day = int(sk.split("#")[1])
            for minute, k in layout.inline_minutes(item).items():
                hour = f"h#{day * 24 + minute // 60:010d}"
                counts[hour] = counts.get(hour, 0) + k
    return counts


def pk_sk_table(dynamodb: Any, name: str = "t", stream: bool = False) -> None:
    """A table keyed by string `pk` and `sk` (with a stream of both images when asked), for tests
    of the emulator itself."""
    extra: dict[str, Any] = {}
    if stream:
        extra["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    dynamodb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        **extra,
    )
