"""Cost of one report run as the events table grows: Tally's Query vs the seed's filtered Scan;
and what one run reads as the hour grows: runs bounded by a budget vs one run reading it all.

    python -m bench.reports [--new 1000] [--old 10000 100000] [--volume 1000 10000 100000] [--budget 10000]

For each table size, on a fresh in-process moto: a first report run sets the checkpoint, `old`
events ingested over the six days before it are written straight into the table, then `new`
events in the hour after it; one report run then reads them. Tally Queries the quarter-hour
partitions of that hour; the seed's ReportScript Scans the whole table with a FilterExpression
on the ingest time. The Query and Scan work is metered and priced by AWS's rules (bench.metering):
each page costs the total size of the items it evaluated, whatever its filter or projection.

Wall time is not reported for that comparison: moto's Query walks the whole table in memory,
which DynamoDB does not.

The volume sweep puts `volume` events in one hour after the checkpoint, then reports the hour
twice on the same table: as the previous design did (one run Queries every partition of the
range to its end, 1 MB pages, and sums everything before committing) and as Tally does (runs
of `--budget` events, each committing a report, until the hour is done). Per design: runs,
the most events and items one run read, Queries, RCU over all runs, and the longest run's wall
time on moto (whose Query walks the whole table in memory: far slower than DynamoDB).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from bench import env

env.prepare()

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer  # noqa: E402

from bench.metering import Meter, MotoProbe, Usage  # noqa: E402
from chalicelib.core import dynamo  # noqa: E402
from chalicelib.core.aws import AwsClients  # noqa: E402
from chalicelib.core.settings import Settings  # noqa: E402
from chalicelib.events import ingest as events  # noqa: E402
from chalicelib.events import packs  # noqa: E402
from chalicelib.reports import ranges as report_ranges  # noqa: E402
from chalicelib.reports import runs as reports_runs  # noqa: E402
from chalicelib.reports.content import Report  # noqa: E402
from tools import moto_patches  # noqa: E402

T0 = 1_795_000_500_000 - 1_795_000_500_000 % 900_000  # a quarter hour: the checkpoint
HOUR_MS = 3_600_000
_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()


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


@contextmanager
def emulated(settings: Settings) -> Iterator[AwsClients]:
    """moto in-process with the stage's tables, queues and bucket; the clients for it."""
    from moto import mock_aws

    from tools import resources

    with mock_aws():
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        yield clients


def measure(old: int, new: int, seed: int = 1) -> list[Row]:
    rng = random.Random(seed)
    settings = Settings()
    with emulated(settings) as clients:
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


def previous_run(dynamodb: Any, settings: Settings, start_ms: int, end_ms: int) -> int:
    """The previous design's read: every partition of the range to its end, then one report;
    the events read."""
    report = Report(report_ranges.report_id(start_ms, end_ms), start_ms, end_ms)
    for _, queries in report_ranges.quarter_queries(start_ms, end_ms, settings.event_write_shards):
        for query in queries:
            condition, values = query.sort_condition()
            request = dynamo.query_request(
                settings.events_table, query.pk, sk=condition, values=values, consistent=True
            )
            for page in dynamo.query_pages(dynamodb, request, "read"):
                for raw in page["Items"]:
                    item = {k: _DESERIALIZER.deserialize(v) for k, v in raw.items()}
                    report.add(e for e in packs.events_in(item) if "counter" in e)
    return report.events


@dataclass
class VolumeRow:
    design: str
    volume: int
    runs: int
    max_events: int  # the most events one run read
    cost: Usage
    max_seconds: float


def _timed(work: Any) -> tuple[Any, float]:
    began = time.perf_counter()
    answer = work()
    return answer, time.perf_counter() - began


def measure_volume(volume: int, budget: int, seed: int = 2) -> list[VolumeRow]:
    rng = random.Random(seed)
    settings = Settings()
    with emulated(settings) as clients:
        settle = settings.report_settle_seconds * 1000
        now = T0 + HOUR_MS + settle
        first = reports_runs.scheduled_budget(settings)
        reports_runs.run(clients.dynamodb, clients.s3, settings, T0 + settle, first)  # the checkpoint at T0
        put_events(clients.dynamodb, settings, sorted(rng.randrange(T0, T0 + HOUR_MS) for _ in range(volume)), rng)
        probe = MotoProbe(clients.dynamodb, region=settings.aws_region)

        before = Meter(probe)
        client = before.attach(AwsClients(settings).dynamodb)
        events_read, seconds = _timed(lambda: previous_run(client, settings, T0, T0 + HOUR_MS))
        assert events_read == volume
        rows = [VolumeRow("previous: one run, all", volume, 1, events_read, before.total("Query"), seconds)]

        tally = Meter(probe)
        client = tally.attach(AwsClients(settings).dynamodb)
        runs, most, slowest, reported = 0, 0, 0.0, 0
        while True:
            spend = reports_runs.Budget(budget)
            result, seconds = _timed(lambda: reports_runs.run(client, clients.s3, settings, now, spend))  # noqa: B023
            runs += 1
            reported += sum(r["events"] for r in result.written)
            most, slowest = max(most, spend.events_read), max(slowest, seconds)
            if not result.more:
                break
        assert reported == volume
        cost = tally.total("Query")
        rows.append(VolumeRow(f"Tally: budget {budget:,}", volume, runs, most, cost, slowest))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--new", type=int, default=1000)
    parser.add_argument("--old", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--volume", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--budget", type=int, default=10_000)
    args = parser.parse_args(argv)
    moto_patches.memoize_table_order()
    if args.volume:
        print_volume([row for volume in args.volume for row in measure_volume(volume, args.budget)])
    if not args.old:
        return

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


def print_volume(rows: list[VolumeRow]) -> None:
    print("Reporting one hour of `events` after the checkpoint: the previous design vs runs bounded by a budget\n")
    header = (
        f"{'design':28} {'events':>8} {'runs':>5} {'max events/run':>14} {'Queries':>8} {'RCU':>9} {'max s/run':>9}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row.design:28} {row.volume:>8,} {row.runs:>5} {row.max_events:>14,} {row.cost.requests:>8,} "
            f"{row.cost.read_units:>9,.1f} {row.max_seconds:>9.2f}"
        )
    print()


if __name__ == "__main__":
    main()
