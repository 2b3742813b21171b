"""Cost of one report run as the events table grows: Tally's Query vs the seed's filtered Scan.

    python -m bench.reports [--new 1000] [--old 10000 100000]

For each table size, on a fresh in-process moto: a first report run sets the checkpoint, `old`
events ingested over the six days before it are written straight into the table, then `new`
events in the hour after it; one report run then reads them. Tally Queries the quarter-hour
partitions of that hour; the seed's ReportScript Scans the whole table with a FilterExpression
on the ingest time. DynamoDB work is counted by a client wrapper and priced by AWS's rules:
Query/Scan cost the total size of the items evaluated per page, rounded up to 4 KB, 1 RCU
strongly consistent, 0.5 eventually consistent (moto's ConsumedCapacity is not used). A
projection does not change that price, so the wrapper drops it and sizes the whole items; a
filter does not either, so each Scan page's evaluated items are re-read unfiltered to size them.

Wall time is not reported: moto's Query walks the whole table in memory, which DynamoDB does not.
"""

from __future__ import annotations

import argparse
import math
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from chalicelib import events, reports
from chalicelib.aws import AwsClients
from chalicelib.settings import Settings

T0 = 1_795_000_500_000 - 1_795_000_500_000 % 900_000  # a quarter hour: the checkpoint
HOUR_MS = 3_600_000
_SERIALIZER = TypeSerializer()


# -- DynamoDB work, priced by AWS's rules -----------------------------------------------------

def value_size(value: dict[str, Any]) -> int:
    (kind, body), = value.items()
    if kind == "S":
        return len(body.encode())
    if kind == "N":
        digits = body.lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(body)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in body.items())
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in body)
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: v}) for v in body)
    raise ValueError(f"unknown DynamoDB type {kind}")


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


@dataclass
class ReadCost:
    calls: int = 0
    items: int = 0
    units: float = 0.0


class CountingDynamoDB:
    """Passes calls through; prices every Query and Scan page by the full items it evaluated."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.cost = ReadCost()

    def query(self, **request: Any) -> Any:
        return self._priced(self._real.query, _whole_items(request))

    def scan(self, **request: Any) -> Any:
        return self._priced(self._real.scan, request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _priced(self, call: Any, request: dict[str, Any]) -> Any:
        page = call(**request)
        self.cost.calls += 1
        scanned = page.get("ScannedCount", 0)
        self.cost.items += scanned
        if scanned:
            evaluated = page["Items"] if scanned == len(page["Items"]) else call(**_whole_items(request, scanned))["Items"]
            per_4kb = 1.0 if request.get("ConsistentRead") else 0.5
            self.cost.units += math.ceil(sum(item_size(i) for i in evaluated) / 4096) * per_4kb
        return page


def _whole_items(request: dict[str, Any], limit: int | None = None) -> dict[str, Any]:
    """The same request without projection and filter: same items evaluated, returned whole."""
    shadow = {k: v for k, v in request.items()
              if k not in ("ProjectionExpression", "FilterExpression", "Select", "ExpressionAttributeNames",
                           "ExpressionAttributeValues")}
    kept = shadow.get("KeyConditionExpression", "")
    names = {k: v for k, v in request.get("ExpressionAttributeNames", {}).items() if k in kept}
    values = {k: v for k, v in request.get("ExpressionAttributeValues", {}).items() if k in kept}
    if names:
        shadow["ExpressionAttributeNames"] = names
    if values:
        shadow["ExpressionAttributeValues"] = values
    if limit is not None:
        shadow["Limit"] = limit
    return shadow


def _memoize_moto_table_order() -> None:
    """moto sorts the whole table on every Query and Scan page; sort once per table content.

    Only the order moto walks items in is cached (keyed by the item count; the benchmark only
    adds items), so every answer and every count stays what moto computes.
    """
    from moto.dynamodb.models.table import Table

    original = Table.all_items
    cache: dict[int, tuple[int, list[Any]]] = {}

    def all_items(self: Any) -> list[Any]:
        size = sum(len(h) for h in self.items.values()) if self.range_key_attr else len(self.items)
        cached = cache.get(id(self))
        if cached is None or cached[0] != size:
            cached = cache[id(self)] = (size, original(self))
        return list(cached[1])

    Table.all_items = all_items


# -- the two designs ---------------------------------------------------------------------------

def tally_run(dynamodb: Any, s3: Any, settings: Settings, now_ms: int) -> int:
    result = reports.run(dynamodb, s3, settings, now_ms)
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
        event = events.Event(f"jobs.provider-{rng.randrange(5)}", f"e-{ingest}-{n}", ingest,
                             settings.default_retention_seconds, {"amount": Decimal(rng.randrange(1, 10_000)) / 100})
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
    cost: ReadCost


def measure(old: int, new: int, seed: int = 1) -> list[Row]:
    from moto import mock_aws

    from tools import resources

    rng = random.Random(seed)
    settings = Settings()
    with mock_aws():
        clients = AwsClients(settings)
        resources.ensure(clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings),
                         settings.aws_region)
        settle = settings.report_settle_seconds * 1000
        reports.run(clients.dynamodb, clients.s3, settings, T0 + settle)  # sets the checkpoint at T0
        put_events(clients.dynamodb, settings, sorted(rng.randrange(T0 - 6 * 24 * HOUR_MS, T0) for _ in range(old)),
                   rng)
        put_events(clients.dynamodb, settings, sorted(rng.randrange(T0, T0 + HOUR_MS) for _ in range(new)), rng)

        rows = []
        counted = CountingDynamoDB(clients.dynamodb)
        found = tally_run(counted, clients.s3, settings, T0 + HOUR_MS + settle)
        rows.append(Row("Tally: Query by quarter hour", old, found, counted.cost))

        counted = CountingDynamoDB(clients.dynamodb)
        found = seed_scan(counted, settings, T0, T0 + HOUR_MS)
        rows.append(Row("seed: Scan + FilterExpression", old, found, counted.cost))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--new", type=int, default=1000)
    parser.add_argument("--old", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args(argv)
    _memoize_moto_table_order()

    rows = [row for old in args.old for row in measure(old, args.new)]
    print(f"One report run over {args.new} new events (1 hour), older events spread over 6 days before it\n")
    header = f"{'design':32} {'old events':>10} {'reported':>8} {'calls':>6} {'items read':>10} {'RCU':>9}"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row.design:32} {row.old:>10,} {row.found:>8,} {row.cost.calls:>6} {row.cost.items:>10,} "
              f"{row.cost.units:>9,.1f}")
    print()
    tally = [r for r in rows if r.design.startswith("Tally")]
    seed = [r for r in rows if r.design.startswith("seed")]
    for t, s in zip(tally, seed):
        print(f"{t.old:>7,} old events: Scan/Query items read {s.cost.items / t.cost.items:6.1f}x, "
              f"RCU {s.cost.units / t.cost.units:6.1f}x")
    if len(tally) > 1:
        print(f"table grown {tally[-1].old / tally[0].old:.0f}x: Tally RCU x{tally[-1].cost.units / tally[0].cost.units:.2f}, "
              f"Scan RCU x{seed[-1].cost.units / seed[0].cost.units:.2f}")


if __name__ == "__main__":
    main()
