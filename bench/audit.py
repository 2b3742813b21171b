"""Cost of the audit per events partition: Tally's Select=COUNT Query vs a Scan of the table.

    python -m bench.audit [--per-partition 10 100 1000] [--old 5000] [--attributes 0 1000]

For each number of events per partition and attribute size, on a fresh in-process moto: `old`
events ingested over the six days before one quarter hour, then `per-partition` events in each
write shard of that quarter hour; the audit's checkpoint is set to that quarter hour and one
audit run compares it (its partitions, EVENT_WRITE_SHARDS of them, whose numbers add up in the
audit item of the stream shard that carried them, as the stream handler leaves it: a clean run,
the usual case). The figures include
the run's own reads (its checkpoint and the list of open findings). The same partitions are
then counted the seed's way, with no per-partition layout to lean on: a Scan of the whole
events table with a FilterExpression on the ingest time (the seed's first report script).

Work is metered and priced by AWS's rules (bench.metering): a Query or Scan page costs the
total size of the items it evaluated, whatever its Select, projection or filter ("Select=COUNT
... does not reduce the read capacity consumed", docs/guarantees.md). The audit's Query is
eventually consistent (half the units); its Query of the quarter hour's audit items is strongly
consistent.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from bench import env

env.prepare()

from boto3.dynamodb.types import TypeSerializer  # noqa: E402

from bench.metering import Meter, MotoProbe, Usage  # noqa: E402
from chalicelib.core.aws import AwsClients  # noqa: E402
from chalicelib.core.settings import Settings  # noqa: E402
from chalicelib.counters import audit, audit_keys, audit_runs  # noqa: E402
from chalicelib.events import ingest as events  # noqa: E402
from tools import moto_patches  # noqa: E402

Q = audit.QUARTER_MS
T0 = 1_795_000_500_000 - 1_795_000_500_000 % Q  # the quarter hour audited
DAY_MS = 86_400_000
_SERIALIZER = TypeSerializer()
STREAM_SHARD = "s:0a1b2c3d"  # the one stream shard that carried the quarter hour


def put_events(dynamodb: Any, settings: Settings, ingests: list[tuple[int, int]], attr_bytes: int) -> None:
    """(ingest time, write shard) pairs straight into the table with BatchWriteItem."""
    batch: list[dict[str, Any]] = []
    for n, (ingest, shard) in enumerate(ingests):
        attributes = {"amount": Decimal(n % 10_000) / 100, "note": "x" * attr_bytes}
        event = events.Event(f"jobs.provider-{n % 5}", f"e-{n}", ingest, settings.default_retention_seconds, attributes)
        item = events.to_item(event, ingest, settings)
        item["pk"] = events.partition_key(ingest, shard)
        batch.append({"PutRequest": {"Item": {k: _SERIALIZER.serialize(v) for k, v in item.items()}}})
        if len(batch) == 25 or n == len(ingests) - 1:
            pending = {settings.events_table: batch}
            while pending:
                pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            batch = []


def seed_scan(dynamodb: Any, settings: Settings, start_ms: int, end_ms: int) -> dict[str, int]:
    """Events per partition of one quarter hour, found by a filtered Scan of the whole table."""
    request: dict[str, Any] = {
        "TableName": settings.events_table,
        "FilterExpression": "ingested_at >= :from AND ingested_at < :to",
        "ExpressionAttributeValues": {":from": {"N": str(start_ms)}, ":to": {"N": str(end_ms)}},
        "ProjectionExpression": "pk",
    }
    found: dict[str, int] = {}
    while True:
        page = dynamodb.scan(**request)
        for item in page["Items"]:
            found[item["pk"]["S"]] = found.get(item["pk"]["S"], 0) + 1
        if "LastEvaluatedKey" not in page:
            return found
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@dataclass
class Row:
    per_partition: int
    attr_bytes: int
    partitions: int
    audit: Usage
    scan: Usage
    short: int


def measure(per_partition: int, old: int, attr_bytes: int, seed: int = 1) -> Row:
    from moto import mock_aws

    from tools import resources

    rng = random.Random(seed)
    settings = Settings()
    shards = settings.event_write_shards
    with mock_aws():
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        put_events(
            clients.dynamodb,
            settings,
            sorted((rng.randrange(T0 - 6 * DAY_MS, T0), rng.randrange(shards)) for _ in range(old)),
            attr_bytes,
        )
        put_events(
            clients.dynamodb,
            settings,
            [(T0 + rng.randrange(Q), shard) for shard in range(shards) for _ in range(per_partition)],
            attr_bytes,
        )
        clients.dynamodb.put_item(
            TableName=settings.counts_table, Item={**audit_runs.CHECKPOINT_KEY, "next_ms": {"N": str(T0)}}
        )
        # What the stream handler wrote, every event applied: its shard's item of the quarter
        # hour, holding every partition's numbers (counters/audit_keys.py).
        pks = audit.partitions(T0, shards)
        clients.dynamodb.put_item(
            TableName=settings.counts_table,
            Item={
                **audit_keys.shard_item_key(pks[0], STREAM_SHARD),
                STREAM_SHARD: {"S": "40" + "9" * 40},
                **{audit_keys.attribute(audit_keys.APPLIED, pk): {"N": str(per_partition)} for pk in pks},
            },
        )
        probe = MotoProbe(clients.dynamodb, region=settings.aws_region)
        tally, scan = Meter(probe), Meter(probe)
        now = T0 + Q + (settings.audit_settle_minutes + 1) * 60_000
        result = audit_runs.run(tally.attach(AwsClients(settings).dynamodb), settings, now)
        assert result.audited == shards, result.as_dict()
        found = seed_scan(scan.attach(AwsClients(settings).dynamodb), settings, T0, T0 + Q)
        assert sum(found.values()) == per_partition * shards
        return Row(
            per_partition,
            attr_bytes,
            shards,
            tally.total("Query", "GetItem", "BatchGetItem"),
            scan.total("Scan"),
            len(result.findings),
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-partition", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--old", type=int, default=5_000)
    parser.add_argument("--attributes", type=int, nargs="+", default=[0, 1000])
    args = parser.parse_args(argv)
    moto_patches.memoize_table_order()

    rows = [measure(n, args.old, size) for size in args.attributes for n in args.per_partition]
    print(f"One audit run over one quarter hour; {args.old:,} older events over 6 days in the table\n")
    header = (
        f"{'events/partition':>16} {'attr B':>6} {'audit RCU/partition':>19} {'RCU/1,000 events':>16} "
        f"{'Scan RCU/partition':>18} {'Scan/audit':>10}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        per = row.audit.read_units / row.partitions
        scan = row.scan.read_units / row.partitions
        assert row.short == 0  # a clean run: every partition adds up
        print(
            f"{row.per_partition:>16,} {row.attr_bytes:>6} {per:>19,.1f} "
            f"{row.audit.read_units * 1000 / (row.per_partition * row.partitions):>16,.1f} "
            f"{scan:>18,.1f} {scan / per:>9.1f}x"
        )


if __name__ == "__main__":
    main()
