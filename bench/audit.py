"""Cost of the audit per events partition: Tally's Select=COUNT Query vs a Scan of the table.

    python -m bench.audit [--per-partition 10 100 1000] [--old 5000] [--attributes 0 1000]
                          [--repair-events 300 3000] [--lose 5]

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
from chalicelib.counters import (  # noqa: E402
    audit,
    audit_items,
    audit_runs,
)
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
            TableName=settings.counts_table, Item={**audit_runs.CHECKPOINT.key, "next_ms": {"N": str(T0)}}
        )
        # What the stream handler wrote, every event applied: its shard's item of the quarter
        # hour, holding every partition's numbers (counters/audit_items.py).
        pks = audit.partitions(T0, shards)
        clients.dynamodb.put_item(
            TableName=settings.counts_table,
            Item={
                **audit_items.shard_item_key(pks[0], STREAM_SHARD),
                STREAM_SHARD: {"S": "40" + "9" * 40},
                **{audit_items.attribute(audit_items.APPLIED, pk): {"N": str(per_partition)} for pk in pks},
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


# -- the repair -----------------------------------------------------------------------------------


@dataclass
class RepairRow:
    events: int
    lost: int
    repair: Usage
    written: int
    buckets: int
    exact: bool


def measure_repair(count: int, lose: int, seed: int = 1) -> RepairRow:
    """`count` events of counter `jobs` (a provider of 5 and a region of 2, an amount and a
    size) ingested over the two hours before the end of quarter hour T0, every stream record
    delivered in batches of 100 but `lose` of one of T0's partitions; then one repair of that
    partition, metered. `exact`: the counter's and a filter's sums of the day equal brute force
    afterwards."""
    from moto import mock_aws

    from bench.counters import deliver, stream_records_of
    from chalicelib.counters import reads, repair
    from tools import resources

    rng = random.Random(seed)
    settings = Settings()
    now = T0 + Q + (settings.audit_settle_minutes + 1) * 60_000
    made = []
    for n in range(count):
        ingest = T0 + Q - 2 * 3_600_000 + n * (2 * 3_600_000) // count
        event = events.Event(
            "jobs",
            f"e-{n}",
            ingest - rng.randrange(300_000),
            settings.default_retention_seconds,
            id_given=False,
            dimensions={"provider": f"p{rng.randrange(5)}", "region": f"r{rng.randrange(2)}"},
            values={"amount": Decimal(rng.randrange(1, 100_000)) / 100, "bytes": Decimal(rng.randrange(1, 10**6))},
        )
        item = events.to_item(event, ingest, settings)
        item["pk"] = events.partition_key(ingest, rng.randrange(settings.event_write_shards))
        item["sk"] = events.sort_key(ingest, f"b{n:06d}")
        made.append((event, {k: _SERIALIZER.serialize(v) for k, v in item.items()}))
    with mock_aws():
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        for start in range(0, len(made), 25):
            clients.dynamodb.batch_write_item(
                RequestItems={settings.events_table: [{"PutRequest": {"Item": i}} for _, i in made[start : start + 25]]}
            )
        short = max(
            audit.partitions(T0, settings.event_write_shards), key=lambda pk: sum(i["pk"]["S"] == pk for _, i in made)
        )
        lost = {id(i) for _, i in [m for m in made if m[1]["pk"]["S"] == short][:lose]}
        records = [r for r in stream_records_of([i for _, i in made]) if id(r["dynamodb"]["NewImage"]) not in lost]
        for start in range(0, len(records), 100):
            deliver(clients.dynamodb, settings, records[start : start + 100], now)
        probe = MotoProbe(clients.dynamodb, region=settings.aws_region)
        meter = Meter(probe)
        result = repair.repair(meter.attach(AwsClients(settings).dynamodb), settings, short, now)
        assert result.busy == [] and result.accounted, result.as_dict()
        first, last = (now - 3 * 3_600_000) // 60_000, now // 60_000
        exact = True
        for where in ({}, {"provider": "p1"}):
            chosen = [e for e, _ in made if all(e.dimensions[k] == v for k, v in where.items())]
            truth: dict[str, Decimal] = {}
            for e in chosen:
                for name, amount in e.values.items():
                    truth[name] = truth.get(name, Decimal(0)) + amount
            read = reads.count_window(clients.dynamodb, settings, "jobs", first, last, now, where=where)
            exact = exact and read.count == len(chosen) and read.sums == truth
        return RepairRow(count, lose, meter.total(), result.written, result.buckets, exact)


def print_repair(rows: list[RepairRow]) -> None:
    print("\nOne repair of a partition short by `lost` records (counter jobs, 2 dimensions, 2 values)\n")
    header = (
        f"{'events':>8} {'lost':>5} {'buckets':>7} {'written':>7} {'requests':>8} {'RCU':>9} {'WCU':>7} "
        f"{'RCU/1,000 events':>16} {'sums exact':>10}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row.events:>8,} {row.lost:>5} {row.buckets:>7} {row.written:>7} {row.repair.requests:>8,} "
            f"{row.repair.read_units:>9,.1f} {row.repair.write_units:>7,.0f} "
            f"{row.repair.read_units * 1000 / row.events:>16,.1f} {row.exact!s:>10}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-partition", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--old", type=int, default=5_000)
    parser.add_argument("--attributes", type=int, nargs="+", default=[0, 1000])
    parser.add_argument("--repair-events", type=int, nargs="*", default=[300, 3000])
    parser.add_argument("--lose", type=int, default=5)
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
    if args.repair_events:
        print_repair([measure_repair(n, args.lose) for n in args.repair_events])


if __name__ == "__main__":
    main()
