"""Cost of one report run as the events table grows: Tally's Query vs the seed's filtered Scan.

    python -m bench.reports [--new 1000] [--old 10000 100000]

For each table size, on a fresh in-process moto: a first report run sets the checkpoint, `old`
events ingested over the six days before it are written straight into the table, then `new`
events in the hour after it; one report run then reads them. Tally Queries the quarter-hour
partitions of that hour; the seed's ReportScript Scans the whole table with a FilterExpression
on the ingest time. The Query and Scan work is metered and priced by AWS's rules (bench.metering):
each page costs the total size of the items it evaluated, whatever its filter or projection.

Wall time is not reported: moto's Query walks the whole table in memory, which DynamoDB does not.
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
from chalicelib.events import ingest as events  # noqa: E402
from chalicelib.reports import runs as reports_runs  # noqa: E402
from tools import moto_patches  # noqa: E402

T0 = 1_795_000_500_000 - 1_795_000_500_000 % 900_000  # a quarter hour: the checkpoint
HOUR_MS = 3_600_000
_SERIALIZER = TypeSerializer()


# -- the two designs ---------------------------------------------------------------------------


def tally_run(dynamodb: Any, s3: Any, settings: Settings, now_ms: int) -> int:
    result = reports_runs.run(dynamodb, s3, settings, now_ms, reports_runs.scheduled_budget(settings))
    return sum(r["events"] for r in result.written)


def seed_scan(dynamodb: Any, settings: Settings, start_ms: int, end_ms: int) -> int:
    """The seed's first ReportScript: Scan everything, filter on the time of the last run."""
    request: dict[str, Any] = {
        "TableName": settings.events_table,
        "FilterExpression": "ingested_at >= :from AND ingested_at < :to",
        "ExpressionAttributeValues": {":from": {"N": str(start_ms)}, ":to": {"N": str(end_ms)}},
    }
    found = 0
    while True:
        page = dynamodb.scan(**request)
        found += len(page["Items"])
        if "LastEvaluatedKey" not in page:
            return found
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


# -- the run -----------------------------------------------------------------------------------


def put_events(dynamodb: Any, settings: Settings, ingest_times: list[int], rng: random.Random) -> None:
    """Straight into the table with BatchWriteItem: the fastest way to fill it."""
    batch: list[dict[str, Any]] = []
    for n, ingest in enumerate(ingest_times):
        event = events.Event(
            f"jobs.provider-{rng.randrange(5)}",
            f"e-{ingest}-{n}",
            ingest,
            settings.default_retention_seconds,
            {"amount": Decimal(rng.randrange(1, 10_000)) / 100},
        )
        item = {k: _SERIALIZER.serialize(v) for k, v in events.to_item(event, ingest, settings).items()}
        batch.append({"PutRequest": {"Item": item}})
        if len(batch) == 25 or n == len(ingest_times) - 1:
            pending = {settings.events_table: batch}
            while pending:
                pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            batch = []


@dataclass
class Row:
    design: str
    old: int
    found: int
    cost: Usage  # of the Query and Scan calls


def measure(old: int, new: int, seed: int = 1) -> list[Row]:
    from moto import mock_aws

    from tools import resources

    rng = random.Random(seed)
    settings = Settings()
    with mock_aws():
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        settle = settings.report_settle_seconds * 1000
        reports_runs.run(
            clients.dynamodb, clients.s3, settings, T0 + settle, reports_runs.scheduled_budget(settings)
        )  # sets the checkpoint at T0
        put_events(
            clients.dynamodb, settings, sorted(rng.randrange(T0 - 6 * 24 * HOUR_MS, T0) for _ in range(old)), rng
        )
        put_events(clients.dynamodb, settings, sorted(rng.randrange(T0, T0 + HOUR_MS) for _ in range(new)), rng)

        probe = MotoProbe(clients.dynamodb, region=settings.aws_region)
        tally, seed = Meter(probe), Meter(probe)
        found = tally_run(tally.attach(AwsClients(settings).dynamodb), clients.s3, settings, T0 + HOUR_MS + settle)
        rows = [Row("Tally: Query by quarter hour", old, found, tally.total("Query", "Scan"))]
        found = seed_scan(seed.attach(AwsClients(settings).dynamodb), settings, T0, T0 + HOUR_MS)
        rows.append(Row("seed: Scan + FilterExpression", old, found, seed.total("Query", "Scan")))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--new", type=int, default=1000)
    parser.add_argument("--old", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args(argv)
    moto_patches.memoize_table_order()

    rows = [row for old in args.old for row in measure(old, args.new)]
    print(f"One report run over {args.new} new events (1 hour), older events spread over 6 days before it\n")
    header = f"{'design':32} {'old events':>10} {'reported':>8} {'calls':>6} {'items read':>10} {'RCU':>9}"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row.design:32} {row.old:>10,} {row.found:>8,} {row.cost.requests:>6} {row.cost.items_read:>10,} "
            f"{row.cost.read_units:>9,.1f}"
        )
    print()
    tally = [r for r in rows if r.design.startswith("Tally")]
    seed = [r for r in rows if r.design.startswith("seed")]
    for t, s in zip(tally, seed):
        print(
            f"{t.old:>7,} old events: Scan/Query items read {s.cost.items_read / t.cost.items_read:6.1f}x, "
            f"RCU {s.cost.read_units / t.cost.read_units:6.1f}x"
        )
    if len(tally) > 1:
        print(
            f"table grown {tally[-1].old / tally[0].old:.0f}x: Tally RCU x{tally[-1].cost.read_units / tally[0].cost.read_units:.2f}, "
            f"Scan RCU x{seed[-1].cost.read_units / seed[0].cost.read_units:.2f}"
        )


if __name__ == "__main__":
    main()
