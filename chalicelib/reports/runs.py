"""A report run: read what arrived since the last report within a Budget, cut where every shard has been read, and
commit reports that tile time: docs/design.md, "Reports"; docs/guarantees.md, "Report runs"."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from chalicelib.core import attributes, checkpoints, dynamo, keyspace, times, transactions
from chalicelib.core.aws import S3, DynamoDB
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import translated
from chalicelib.events import ingest as events
from chalicelib.events import packs
from chalicelib.reports import ranges as report_ranges
from chalicelib.reports.content import Report

log = logging.getLogger(__name__)

CHECKPOINT = checkpoints.Checkpoint("report", keyspace.REPORT, "end_ms")
INDEX_PK = f"{keyspace.REPORT}index"
OBJECT_PREFIX = "reports/"
MAX_REPORT_SPAN_MS = times.DAY_MS
# Queries one run makes at most: a quiet day is 96 quarter hours x EVENT_WRITE_SHARDS Queries
# (384 at 4 shards), so a run catches up about a week of quiet time, the events' own TTL.
MAX_RUN_QUERIES = 3_000
# Items one Query page asks for at most (DynamoDB also ends a page at 1 MB).
PAGE_ITEMS = 1_000
# POST /reports, behind API Gateway's 29 s, reads a tenth of what a scheduled run (300 s) reads.
REQUEST_SHARE = 10


@dataclass
class Budget:
    """What one run may still read, events and Queries: spent once either is (docs/design.md, "Reports")."""

    events: int
    queries: int = MAX_RUN_QUERIES
    events_read: int = 0
    queries_made: int = 0
    widest: int = 0  # the most events one item read so far holds

    @property
    def spent(self) -> bool:
        return self.events_read >= self.events or self.queries_made >= self.queries

    def page_items(self, readers: int) -> int:
        """Items to ask each of `readers` Queries for (PAGE_ITEMS at most, 1 at least)."""
        left = max(0, self.events - self.events_read)
        per_item = self.widest or events.MAX_BATCH
        return max(1, min(PAGE_ITEMS, left // (max(1, readers) * per_item)))

    def count(self, item: dict[str, Any]) -> None:
        held = packs.count(item)
        self.events_read += held
        self.widest = max(self.widest, held)


def scheduled_budget(settings: Settings) -> Budget:
    return Budget(settings.report_run_events)


def request_budget(settings: Settings) -> Budget:
    return Budget(max(1, settings.report_run_events // REQUEST_SHARE), max(1, MAX_RUN_QUERIES // REQUEST_SHARE))


@dataclass
class RunResult:
    written: list[dict[str, Any]] = field(default_factory=list)
    superseded: bool = False  # another run committed the range this one had read
    more: bool = False  # the budget was spent before the run reached now - settle

    def as_dict(self) -> dict[str, Any]:
        return {"reports": self.written, "superseded": self.superseded, "more": self.more}


def run(dynamodb: DynamoDB, s3: S3, settings: Settings, now_ms: int, budget: Budget) -> RunResult:
    """Report what was ingested from the checkpoint up to now minus the settle delay, in reports
    of at most a day, until the budget is spent."""
    cutoff = now_ms - settings.report_settle_seconds * 1000
    first_start = report_ranges.first_start(cutoff, settings.report_interval_minutes)
    result = RunResult()
    while True:
        checkpoint = CHECKPOINT.read(dynamodb, settings.counts_table)
        start = first_start if checkpoint is None else checkpoint
        if start >= cutoff or budget.spent:
            result.more = start < cutoff
            return result
        report = read_report(dynamodb, settings, start, min(cutoff, start + MAX_REPORT_SPAN_MS), budget, now_ms)
        _put_objects(s3, settings, report)
        if not _commit(dynamodb, settings, checkpoint, report):
            _discard_unless_committed(dynamodb, s3, settings, report.id)
            result.superseded = True
            return result
        log.debug("report %s: %d events", report.id, report.events)
        result.written.append(report.summary())


def read_report(
    dynamodb: DynamoDB, settings: Settings, start_ms: int, end_ms: int, budget: Budget, now_ms: int
) -> Report:
    """The report of [start_ms, end_ms), or of [start_ms, cut) if the budget is spent first (the
    cut is always after start_ms: docs/design.md, "Reports"). Events past their retention are skipped."""
    report = Report(report_ranges.report_id(start_ms, end_ms), start_ms, end_ms)
    for quarter, queries in report_ranges.quarter_queries(start_ms, end_ms, settings.event_write_shards):
        if budget.spent and quarter > start_ms:
            return _ended(report, quarter)
        shards = [_ShardReader(dynamodb, settings.events_table, query, now_ms) for query in queries]
        while open_shards := [shard for shard in shards if not shard.done]:
            behind = [shard for shard in open_shards if shard.reached <= start_ms]
            if budget.spent and not behind:
                cut = min(shard.reached for shard in open_shards)
                _add_before(report, shards, cut)
                return _ended(report, cut)
            for shard in behind if budget.spent else open_shards:
                shard.read_page(budget.page_items(len(open_shards)), budget)
            _add_before(report, shards, min((s.reached for s in shards if not s.done), default=end_ms))
    return report


class _ShardReader:
    """One write shard of one quarter hour, read a page at a time in sort-key (time) order."""

    def __init__(self, dynamodb: DynamoDB, table: str, query: report_ranges.PartitionQuery, now_ms: int) -> None:
        condition, values = query.sort_condition()
        self._dynamodb = dynamodb
        self._now_s = now_ms // 1000
        self._request = dynamo.query_request(table, query.pk, sk=condition, values=values, consistent=True)
        self.done = False
        self.reached = -1  # the ingest time of the last item read
        self.pending: list[tuple[int, dict[str, Any]]] = []  # (ingest time, event) read, not yet added

    def read_page(self, limit: int, budget: Budget) -> None:
        request = {**self._request, "Limit": limit}
        page = next(dynamo.query_pages(self._dynamodb, request, "the events of the report could not be read"))
        budget.queries_made += 1
        for raw in page.get("Items", []):
            item = attributes.deserialized(raw)
            budget.count(item)
            self.reached = int(item["ingested_at"])  # what its sort key begins with
            for event in packs.events_in(item, self._now_s):
                if event.get("kind") == packs.EVENT_KIND and "counter" in event:
                    self.pending.append((self.reached, event))
        if "LastEvaluatedKey" in page:
            self._request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        else:
            self.done = True


def _add_before(report: Report, shards: list[_ShardReader], cut: int) -> None:
    """Add to the report the events read that were ingested before `cut`; keep the others."""
    for shard in shards:
        report.add(event for t, event in shard.pending if t < cut)
        shard.pending = [(t, event) for t, event in shard.pending if t >= cut]


def _ended(report: Report, cut: int) -> Report:
    return replace(report, id=report_ranges.report_id(report.start_ms, cut), end_ms=cut)


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
    move = CHECKPOINT.move(settings.counts_table, checkpoint, report.end_ms, report_id={"S": report.id})
    numbers = {"start_ms": report.start_ms, "end_ms": report.end_ms, "events": report.events}
    item = {"pk": {"S": INDEX_PK}, "sk": {"S": report.id}, **{k: {"N": str(v)} for k, v in numbers.items()}}
    index = {"TableName": settings.counts_table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
    # A transaction on the same items in flight is retried; the condition then decides.
    return transactions.write_items(dynamodb, [move, {"Put": index}], what="moving the report checkpoint", attempts=5)


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
    key = {"pk": {"S": INDEX_PK}, "sk": {"S": report_id}}
    return dynamo.get_item(dynamodb, settings.counts_table, key, "the report index could not be read")
