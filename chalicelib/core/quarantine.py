"""Records a background handler could not apply, set aside where an operator can find them (one item however
often a record is set aside): docs/design.md, "Where poison goes"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.core import attributes, dynamo, keyspace, pager, queues, times
from chalicelib.core.aws import SQS, DynamoDB
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import translated

EVENTS_STREAM = "events-stream"
UNIQUES_QUEUE = "uniques-queue"
SOURCES = (EVENTS_STREAM, UNIQUES_QUEUE)
TTL_SECONDS = 30 * 86400
MAX_RECORD_CHARS = 8000


def partition_key(source: str) -> str:
    return f"{keyspace.QUARANTINE}{source}"


def put(
    dynamodb: DynamoDB, settings: Settings, source: str, record_id: str, record: str, reason: str, now_ms: int
) -> None:
    with translated(f"could not set a bad {source} record aside"):
        dynamodb.put_item(
            TableName=settings.counts_table,
            Item={
                "pk": {"S": partition_key(source)},
                "sk": {"S": record_id or "unknown"},
                "reason": {"S": reason},
                "record": {"S": record[:MAX_RECORD_CHARS]},
                "seen_at": {"S": times.iso(now_ms)},
                "expires_at": {"N": str(now_ms // 1000 + TTL_SECONDS)},
            },
        )


def list_records(dynamodb: DynamoDB, settings: Settings, params: Mapping[str, str]) -> dict[str, Any]:
    """`{"records": [...], "next"}`: set-aside records of `source` (default every source, in
    turn), one page (core.pager) of `limit` after `cursor`."""
    source = params.get("source")
    if source is not None and source not in SOURCES:
        raise ValidationError(f"source must be one of {', '.join(SOURCES)}")
    listed = [source] if source else list(SOURCES)
    request = pager.page_request(params, lambda position: pager.split_position(position, listed))
    found, cursor = pager.query_across(
        dynamodb, settings.counts_table, {n: partition_key(n) for n in listed}, request, "could not read the quarantine"
    )
    texts = ("reason", "seen_at", "record")
    records = [
        {"source": name, "id": attributes.sort_key(i), **{t: attributes.text(i, t) for t in texts}} for name, i in found
    ]
    return {"records": records, "next": cursor}


MAX_COUNTED = 10_000
VIEWS_DEAD_LETTER = "views-dead-letter-queue"


def counts(dynamodb: DynamoDB, sqs: SQS, settings: Settings) -> list[dict[str, Any]]:
    """How many records each source has set aside: a COUNT Query per source stopped past MAX_COUNTED
    (`complete` false then), and the views' dead-letter queue (SQS's approximate count)."""
    answer: list[dict[str, Any]] = []
    for name in SOURCES:
        request = dynamo.query_request(settings.counts_table, partition_key(name), count=True)
        total = 0
        for page in dynamo.query_pages(dynamodb, request, "could not count the quarantine"):
            total += int(page.get("Count", 0))
            if total >= MAX_COUNTED and "LastEvaluatedKey" in page:
                break
        answer.append({"source": name, "records": total, "complete": "LastEvaluatedKey" not in page})
    url = queues.dead_letter_url(sqs, settings.views_queue)
    with translated("could not read the views dead-letter queue"):
        queue = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    waiting = int(queue.get("Attributes", {}).get("ApproximateNumberOfMessages", 0))
    answer.append({"source": VIEWS_DEAD_LETTER, "records": waiting, "complete": True, "approximate": True})
    return answer
