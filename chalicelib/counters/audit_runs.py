"""An audit run, its findings and `GET /audit`: the storage side of audit.py. How a run compares and
why each partition is reported once: docs/counting.md, "The audit"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import attributes, checkpoints, dynamo, keyspace, pager, times, transactions
from chalicelib.core.aws import DynamoDB
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import translated
from chalicelib.counters import audit, audit_items, layout
from chalicelib.events import packs

CHECKPOINT = checkpoints.Checkpoint("audit", keyspace.AUDIT_RUN, "next_ms")
FINDINGS_PK = f"{keyspace.AUDIT_RUN}short"
FINDING_TTL_SECONDS = 14 * 86400
RECHECK_LIMIT = 25
# One transaction per quarter hour: the checkpoint plus at most this many findings (the rest,
# with more write shards than that, are put first, on their own; a repeated put is harmless).
FINDINGS_PER_TRANSACTION = transactions.MAX_ITEMS - 1


@dataclass
class AuditResult:
    audited: int = 0  # partitions compared for the first time by this run
    findings: list[audit.Finding] = field(default_factory=list)  # of those, the ones that do not add up
    rechecked: int = 0
    resolved: int = 0  # open findings that now add up, removed
    open: int = 0  # findings still listed after this run (of those rechecked)
    superseded: bool = False  # another run moved the checkpoint first; this one reported nothing
    checkpoint_ms: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "audited": self.audited,
            "shortfall": audit.total_shortfall(self.findings),
            "short": [f.as_dict() for f in self.findings],
            "rechecked": self.rechecked,
            "resolved": self.resolved,
            "open": self.open,
            "superseded": self.superseded,
            "checkpoint": None if self.checkpoint_ms is None else times.iso(self.checkpoint_ms),
        }


def run(dynamodb: DynamoDB, settings: Settings, now_ms: int) -> AuditResult:
    """Compare the settled partitions no run has compared yet, then recheck open findings."""
    result = AuditResult()
    checkpoint = CHECKPOINT.read(dynamodb, settings.counts_table)
    if checkpoint is None:  # the first run: compare from here on (counters/audit.py)
        start = audit.settled_before(now_ms, settings.audit_settle_minutes)
        if not _commit(dynamodb, settings, None, start, [], now_ms):
            result.superseded = True
            return result
        checkpoint = start
    result.checkpoint_ms = checkpoint
    quarters = audit.quarters_to_audit(checkpoint, now_ms, settings.audit_settle_minutes, audit.MAX_QUARTERS_PER_RUN)
    for quarter in quarters:
        pks = audit.partitions(quarter, settings.event_write_shards)
        # What is stored first, then what was accounted, as for one partition: a record counted
        # in between shows as accounted (its event was stored already), never as missing.
        stored = {pk: stored_count(dynamodb, settings, pk) for pk in pks}
        group = read_group(dynamodb, settings, pks[0])  # one quarter hour: one group
        findings = [audit.finding(pk, stored[pk], audit_items.group_accounts(group, pk)) for pk in pks]
        short = [f for f in findings if not f.adds_up]
        if not _commit(dynamodb, settings, checkpoint, quarter + audit.QUARTER_MS, short, now_ms):
            result.superseded = True
            break
        checkpoint = result.checkpoint_ms = quarter + audit.QUARTER_MS
        result.audited += len(findings)
        result.findings += short
    found = open_findings(dynamodb, settings, None, RECHECK_LIMIT, now_ms).items
    adds_up = [recheck(dynamodb, settings, attributes.sort_key(i), now_ms).adds_up for i in found]
    result.rechecked, result.resolved, result.open = len(adds_up), sum(adds_up), adds_up.count(False)
    return result


def compare(dynamodb: DynamoDB, settings: Settings, events_pk: str) -> audit.Finding:
    """One partition now: its stored events against its audit items."""
    stored = stored_count(dynamodb, settings, events_pk)
    return audit.finding(events_pk, stored, accounted(dynamodb, settings, events_pk))


def accounted(dynamodb: DynamoDB, settings: Settings, events_pk: str) -> dict[str, int]:
    """Everything the audit items say of one events partition."""
    return audit_items.group_accounts(read_group(dynamodb, settings, events_pk), events_pk)


def read_group(dynamodb: DynamoDB, settings: Settings, events_pk: str) -> list[dict[str, Any]]:
    """The audit items of an events partition's group, strongly consistent (docs/counting.md, "The audit")."""
    request = dynamo.query_request(settings.counts_table, audit_items.group_pk(events_pk), consistent=True)
    return dynamo.query_items(dynamodb, request, "could not read the audit items")


def stored_count(dynamodb: DynamoDB, settings: Settings, events_pk: str) -> int:
    """Events stored under one events partition key (events/packs.py); cost: docs/counting.md, "The audit"."""
    names = {"#k": "kind", "#n": packs.COUNT}
    request = dynamo.query_request(settings.events_table, events_pk, projection="#k, #n", names=names)
    return sum(
        packs.count(attributes.deserialized(item))
        for item in dynamo.query_items(dynamodb, request, "could not count an events partition")
    )


def finding_item(finding: audit.Finding, now_ms: int) -> dict[str, Any]:
    numbers = {name: {"N": str(value)} for name, value in finding.as_dict().items() if isinstance(value, int)}
    return {
        "pk": {"S": FINDINGS_PK},
        "sk": {"S": finding.partition},
        **numbers,
        "audited_at": {"N": str(now_ms)},
        "expires_at": {"N": str(now_ms // 1000 + FINDING_TTL_SECONDS)},
    }


def _commit(
    dynamodb: DynamoDB,
    settings: Settings,
    checkpoint: int | None,
    next_ms: int,
    short: list[audit.Finding],
    now_ms: int,
) -> bool:
    """Move the checkpoint to next_ms and write the findings, if the checkpoint is still as read."""
    table = settings.counts_table
    extra = [finding_item(f, now_ms) for f in short[FINDINGS_PER_TRANSACTION:]]
    dynamo.put_items(dynamodb, table, extra, "could not record an audit finding")
    items = [CHECKPOINT.move(table, checkpoint, next_ms)] + [
        {"Put": {"TableName": table, "Item": finding_item(f, now_ms)}} for f in short[:FINDINGS_PER_TRANSACTION]
    ]
    return transactions.write_items(dynamodb, items, what="moving the audit checkpoint", attempts=5)


def recheck(dynamodb: DynamoDB, settings: Settings, partition: str, now_ms: int) -> audit.Finding:
    """Compare one partition again: remove its finding if it adds up now, else refresh it."""
    finding = compare(dynamodb, settings, partition)
    with translated("could not update an audit finding"):
        if finding.adds_up:
            dynamodb.delete_item(TableName=settings.counts_table, Key=layout.item_key(FINDINGS_PK, partition))
        else:
            dynamodb.put_item(TableName=settings.counts_table, Item=finding_item(finding, now_ms))
    return finding


def open_findings(dynamodb: DynamoDB, settings: Settings, after: str | None, limit: int, now_ms: int) -> pager.Page:
    """Up to `limit` live findings after partition `after`, oldest first."""
    return pager.query_page(
        dynamodb,
        settings.counts_table,
        FINDINGS_PK,
        pager.PageRequest(after, limit),
        "could not read the audit findings",
        live_at_s=now_ms // 1000,
        consistent=True,
    )


def listing(dynamodb: DynamoDB, settings: Settings, params: dict[str, str], now_ms: int) -> dict[str, Any]:
    """`GET /audit`: `{"partitions": [...], "next"}`, partitions that do not add up, oldest
    first, `limit` (1-1000, 100) a page, `cursor` the `next` of the previous page."""
    request = pager.page_request(params, _check_partition)
    page = open_findings(dynamodb, settings, request.after, request.limit, now_ms)
    numbers = ("stored", *audit_items.ACCOUNTS, "shortfall")
    return {
        "partitions": [
            {
                "partition": attributes.sort_key(i),
                **{name: attributes.integer(i, name) for name in numbers if name in i},
                "audited_at": times.iso(attributes.integer(i, "audited_at")),
            }
            for i in page.items
        ],
        "next": page.next,
    }


def _check_partition(text: str) -> None:
    if not audit.EVENTS_PK.fullmatch(text):
        raise ValidationError("not an events partition key")


def parse_partition(body: Any, settings: Settings, now_ms: int) -> str:
    """The events partition a repair body names: `{"partition": "YYYYMMDDHHXX#<shard>"}`, of a
    quarter hour that has closed and settled; ValidationError otherwise."""
    if not isinstance(body, dict) or set(body) != {"partition"} or not isinstance(body["partition"], str):
        raise ValidationError('the body is {"partition": "<events partition key>"} as GET /audit lists it')
    partition = body["partition"]
    try:
        quarter = audit.quarter_of(partition)
    except ValueError as exc:
        raise ValidationError("partition must look like 202611181415#2 (quarter hour of ingest, write shard)") from exc
    if int(partition.split("#")[1]) >= settings.event_write_shards:
        raise ValidationError(
            f"partition's write shard must be below EVENT_WRITE_SHARDS ({settings.event_write_shards})"
        )
    if quarter + audit.QUARTER_MS > audit.settled_before(now_ms, settings.audit_settle_minutes):
        raise ValidationError(
            f"partition's quarter hour has not settled yet (AUDIT_SETTLE_MINUTES={settings.audit_settle_minutes})"
        )
    return partition
