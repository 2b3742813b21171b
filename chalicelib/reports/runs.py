"""A report run: read what arrived since the last run and commit one report."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from chalicelib.core import attributes, dynamo, keyspace, times, transactions
from chalicelib.core.aws import S3, DynamoDB
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import translated
from chalicelib.events import packs
from chalicelib.reports import ranges as report_ranges
from chalicelib.reports.content import Report

log = logging.getLogger(__name__)

CHECKPOINT_KEY = {"pk": {"S": f"{keyspace.REPORT}checkpoint"}, "sk": {"S": "#"}}
INDEX_PK = f"{keyspace.REPORT}index"
OBJECT_PREFIX = "reports/"
MAX_REPORT_SPAN_MS = times.DAY_MS
_COMMIT_ATTEMPTS = 5
_DESERIALIZER = TypeDeserializer()


@dataclass
class RunResult:
    written: list[dict[str, Any]] = field(default_factory=list)
    superseded: bool = False  # another run committed the range this one had read

    def as_dict(self) -> dict[str, Any]:
        return {"reports": self.written, "superseded": self.superseded}


def run(dynamodb: DynamoDB, s3: S3, settings: Settings, now_ms: int) -> RunResult:
    """Report everything ingested from the checkpoint up to now minus the settle delay."""
    cutoff = now_ms - settings.report_settle_seconds * 1000
    result = RunResult()
    while True:
        checkpoint = read_checkpoint(dynamodb, settings)
        start = (
            checkpoint
            if checkpoint is not None
            else report_ranges.first_start(cutoff, settings.report_interval_minutes)
        )
        if start >= cutoff:
            return result
        end = min(cutoff, start + MAX_REPORT_SPAN_MS)
        report = Report(report_ranges.report_id(start, end), start, end)
        report.add(read_events(dynamodb, settings, start, end, now_ms))
        _put_objects(s3, settings, report)
        if not _commit(dynamodb, settings, checkpoint, report):
            _discard_unless_committed(dynamodb, s3, settings, report.id)
            result.superseded = True
            return result
        log.debug("report %s: %d events", report.id, report.events)
        result.written.append(report.summary())


def read_checkpoint(dynamodb: DynamoDB, settings: Settings) -> int | None:
    with translated("the report checkpoint could not be read"):
        item = dynamodb.get_item(TableName=settings.counts_table, Key=CHECKPOINT_KEY, ConsistentRead=True).get("Item")
    return None if item is None else attributes.integer(item, "end_ms")


def read_events(
    dynamodb: DynamoDB, settings: Settings, start_ms: int, end_ms: int, now_ms: int | None = None
) -> Iterator[dict[str, Any]]:
    """The events ingested in [start_ms, end_ms), by strongly consistent, paginated Queries:
    every event of every item once, packs unpacked (events/packs.py), items of the one-event
    layout as they are; with `now_ms`, none past its own retention in the events table."""
    now_s = None if now_ms is None else now_ms // 1000
    for query in report_ranges.partition_queries(start_ms, end_ms, settings.event_write_shards):
        condition, values = query.key_condition()
        request: dict[str, Any] = {
            "TableName": settings.events_table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
        }
        for page in dynamo.query_pages(dynamodb, request, "the events of the report could not be read"):
            for raw in page.get("Items", []):
                item = {k: _DESERIALIZER.deserialize(v) for k, v in raw.items()}
                for event in packs.events_in(item, now_s):
                    if event.get("kind") == packs.EVENT_KIND and "counter" in event:
                        yield event


def _object_keys(report_id: str) -> dict[str, str]:
    return {"json": f"{OBJECT_PREFIX}{report_id}.json", "csv": f"{OBJECT_PREFIX}{report_id}.csv"}


def _put_objects(s3: S3, settings: Settings, report: Report) -> None:
    keys = _object_keys(report.id)
    bodies = {
        "json": (json.dumps(report.as_dict(), sort_keys=True), "application/json"),
        "csv": (report.as_csv(), "text/csv"),
    }
    with translated("the report could not be written to S3"):
        for kind, (body, content_type) in bodies.items():
            s3.put_object(Bucket=settings.reports_bucket, Key=keys[kind], Body=body.encode(), ContentType=content_type)


def _commit(dynamodb: DynamoDB, settings: Settings, checkpoint: int | None, report: Report) -> bool:
    """Move the checkpoint and index the report, if the checkpoint is still where it was read."""
    move: dict[str, Any] = {
        "TableName": settings.counts_table,
        "Key": CHECKPOINT_KEY,
        "UpdateExpression": "SET end_ms = :end, report_id = :id",
        "ExpressionAttributeValues": {":end": {"N": str(report.end_ms)}, ":id": {"S": report.id}},
    }
    if checkpoint is None:
        move["ConditionExpression"] = "attribute_not_exists(pk)"
    else:
        move["ConditionExpression"] = "end_ms = :expected"
        move["ExpressionAttributeValues"][":expected"] = {"N": str(checkpoint)}
    index = {
        "TableName": settings.counts_table,
        "Item": {
            "pk": {"S": INDEX_PK},
            "sk": {"S": report.id},
            "start_ms": {"N": str(report.start_ms)},
            "end_ms": {"N": str(report.end_ms)},
            "events": {"N": str(report.events)},
        },
        "ConditionExpression": "attribute_not_exists(pk)",
    }
    # A transaction on the same items in flight is retried; the condition then decides.
    try:
        transactions.write(
            dynamodb,
            [report],
            lambda _: transactions.Plan([{"Update": move}, {"Put": index}], [None, None]),
            what="moving the report checkpoint",
            attempts=_COMMIT_ATTEMPTS,
        )
    except transactions.ConditionFailedError:
        return False
    return True


def _discard_unless_committed(dynamodb: DynamoDB, s3: S3, settings: Settings, report_id: str) -> None:
    """Remove a losing run's objects; the same id committed by the winner holds the same events."""
    try:
        if _index_item(dynamodb, settings, report_id) is not None:
            return
        with translated("the objects of a superseded report could not be removed"):
            for key in _object_keys(report_id).values():
                s3.delete_object(Bucket=settings.reports_bucket, Key=key)
    except StorageError:
        # Harmless: objects without an index item are never listed nor served.
        log.warning("could not remove the objects of superseded report %s", report_id)


def _index_item(dynamodb: DynamoDB, settings: Settings, report_id: str) -> dict[str, Any] | None:
    with translated("the report index could not be read"):
        item: dict[str, Any] | None = dynamodb.get_item(
            TableName=settings.counts_table, ConsistentRead=True, Key={"pk": {"S": INDEX_PK}, "sk": {"S": report_id}}
        ).get("Item")
        return item
