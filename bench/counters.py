"""Windowed counters against the seed's design (counting-on-dynamodb), in one run on moto.

    python -m bench.counters [--events 10000] [--batch 100] [--read-volumes 10000,100000]

Writes: the same stream batches go through Tally's handler and through the seed's (two
UpdateItem calls per event, hour and minute); every batch is then delivered a second time, as
Lambda may, and each design's 24-hour count is compared with the truth. Write units are
computed from item sizes (bench.metering). Scenarios differ in how fast events are ingested
and whether their own times follow ingest (a live feed) or spread over 30 hours (a backfill,
like the seed's mock data).

Reads: a 24-hour count for one of 3 counters when 10,000 and 100,000 events are stored:
Tally's BatchGetItem against a Query over the raw events of the last 24 hours.
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass
from typing import Any

from bench import env

env.prepare()

import boto3  # noqa: E402
from boto3.dynamodb.types import TypeSerializer  # noqa: E402
from moto import mock_aws  # noqa: E402

from bench.metering import Meter, MotoProbe  # noqa: E402
from chalicelib.core.settings import Settings  # noqa: E402
from chalicelib.counters import reads as counters  # noqa: E402
from chalicelib.counters import stream_apply as counting  # noqa: E402
from chalicelib.events import ingest as events  # noqa: E402
from chalicelib.events import stream_records  # noqa: E402
from tools import resources  # noqa: E402

COUNTERS = ["jobs.provider-1", "jobs.provider-2", "jobs.provider-3"]
SEED_TABLE = "seed-counts"
HOUR_MS = 3_600_000
_SERIALIZER = TypeSerializer()


@dataclass(frozen=True)
class Scenario:
    name: str
    ingest_per_second: float
    spread_hours: float  # 0: event time = ingest time


SCENARIOS = [
    Scenario("live, 1 event/s", 1, 0),
    Scenario("live, 10 events/s", 10, 0),
    Scenario("live, 100 events/s", 100, 0),
    Scenario("backfill over 30 h", 100, 30),
]


def make_items(
    count: int, scenario: Scenario, start_ms: int, settings: Settings, rng: random.Random
) -> list[dict[str, Any]]:
    items = []
    for i in range(count):
        ingest = start_ms + int(i * 1000 / scenario.ingest_per_second)
        t = ingest - rng.randrange(int(scenario.spread_hours * HOUR_MS)) if scenario.spread_hours else ingest
        event = events.Event(rng.choice(COUNTERS), f"gen-{i}", t, 7 * 86400, id_given=False)
        items.append({k: _SERIALIZER.serialize(v) for k, v in events.to_item(event, ingest, settings).items()})
    return items


def stream_batches(items: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    records = [
        {"eventID": str(i), "eventName": "INSERT", "dynamodb": {"NewImage": item, "SequenceNumber": str(i)}}
        for i, item in enumerate(items)
    ]
    return [records[i : i + size] for i in range(0, len(records), size)]


def seed_apply(dynamodb: Any, batch: list[dict[str, Any]]) -> None:
    """The seed's handler, as designed: hour and minute counters, one UpdateItem each per event."""
    for record in batch:
        if record["eventName"] != "INSERT":
            continue
        image = record["dynamodb"]["NewImage"]
        ms = int(image["time"]["N"])
        for key in (f"{image['counter']['S']}_hour_{ms // HOUR_MS}", f"{image['counter']['S']}_minute_{ms // 60_000}"):
            dynamodb.update_item(
                TableName=SEED_TABLE,
                Key={"id": {"S": key}},
                UpdateExpression="SET #count = if_not_exists(#count, :zero) + :one, #ttl = if_not_exists(#ttl, :ttl)",
                ExpressionAttributeNames={"#count": "count", "#ttl": "ttl"},
                ExpressionAttributeValues={
                    ":one": {"N": "1"},
                    ":zero": {"N": "0"},
                    ":ttl": {"N": str(ms // 1000 + 90_000)},
                },
            )


def seed_24h(dynamodb: Any, counter: str, end_ms: int) -> int:
    """The seed's read: 24 hour keys plus the minutes of the oldest partial hour."""
    last = end_ms // 60_000
    first = last - 1439
    keys = [f"{counter}_hour_{h}" for h in range(first // 60 + 1, last // 60 + 1)]
    keys += [f"{counter}_minute_{m}" for m in range(first, (first // 60 + 1) * 60)]
    total = 0
    for start in range(0, len(keys), 100):
        response = dynamodb.batch_get_item(
            RequestItems={SEED_TABLE: {"Keys": [{"id": {"S": k}} for k in keys[start : start + 100]]}}
        )
        total += sum(int(i["count"]["N"]) for i in response["Responses"][SEED_TABLE])
    return total


def fresh_stack(settings: Settings) -> tuple[Any, Any]:
    session = boto3.session.Session(region_name="us-east-1")
    dynamodb = session.client("dynamodb")
    probe = MotoProbe(dynamodb)
    resources.ensure(
        dynamodb, session.client("sqs"), session.client("s3"), resources.for_settings(settings), "us-east-1"
    )
    dynamodb.create_table(
        TableName=SEED_TABLE,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )
    return dynamodb, probe


def run_writes(scenario: Scenario, count: int, batch_size: int) -> list[str]:
    settings = Settings.from_env({})
    rng = random.Random(42)
    with mock_aws():
        plain, probe = fresh_stack(settings)
        start = 1_795_000_000_000
        items = make_items(count, scenario, start, settings, rng)
        batches = stream_batches(items, batch_size)
        now = start + int(count * 1000 / scenario.ingest_per_second) + 1000
        truth = {
            c: sum(1 for i in items if i["counter"]["S"] == c and now // 60_000 - 1439 <= int(i["time"]["N"]) // 60_000)
            for c in COUNTERS
        }
        session = boto3.session.Session(region_name="us-east-1")
        tally_client, seed_client = session.client("dynamodb"), session.client("dynamodb")
        tally, seed = Meter(probe), Meter(probe)
        tally.attach(tally_client)
        seed.attach(seed_client)
        began = time.perf_counter()
        for batch in batches:
            counting.apply_stream_batch(
                tally_client, settings, stream_records.from_lambda_event({"Records": batch}), now
            )
        tally_seconds = time.perf_counter() - began
        began = time.perf_counter()
        for batch in batches:
            seed_apply(seed_client, batch)
        seed_seconds = time.perf_counter() - began
        first_pass = (tally.total().per(count), seed.total().per(count))
        for batch in batches:  # at-least-once: every batch again
            counting.apply_stream_batch(plain, settings, stream_records.from_lambda_event({"Records": batch}), now)
            seed_apply(plain, batch)
        last = now // 60_000
        tally_ok = all(
            counters.count_window(plain, settings, c, last - 1439, last, now).count == truth[c] for c in COUNTERS
        )
        seed_counts = {c: seed_24h(plain, c, now) for c in COUNTERS}
        seed_ok = seed_counts == truth
    (t, s) = first_pass
    return [
        f"| {scenario.name} | seed | {s['requests']:.0f} | {s['write_units']:.0f} | 1.00 | "
        f"{'exact' if seed_ok else 'off by ' + str(sum(seed_counts.values()) - sum(truth.values()))} | {seed_seconds:.1f} |",
        f"| {scenario.name} | Tally | {t['requests']:.0f} | {t['write_units']:.0f} | "
        f"{t['write_units'] / s['write_units']:.2f} | {'exact' if tally_ok else 'WRONG'} | {tally_seconds:.1f} |",
    ]


def run_reads(volume: int) -> list[str]:
    settings = Settings.from_env({})
    rng = random.Random(7)
    with mock_aws():
        plain, probe = fresh_stack(settings)
        now = 1_795_000_000_000
        scenario = Scenario("read", volume / 86_400, 0)
        items = make_items(volume, scenario, now - 86_400_000, settings, rng)
        for start in range(0, len(items), 25):
            plain.batch_write_item(
                RequestItems={settings.events_table: [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]}
            )
        for batch in stream_batches(items, 1000):
            counting.apply_stream_batch(plain, settings, stream_records.from_lambda_event({"Records": batch}), now)
        truth = sum(
            1
            for i in items
            if i["counter"]["S"] == COUNTERS[1] and int(i["time"]["N"]) // 60_000 >= now // 60_000 - 1439
        )
        session = boto3.session.Session(region_name="us-east-1")
        tally_client, raw_client = session.client("dynamodb"), session.client("dynamodb")
        tally, raw = Meter(probe), Meter(probe)
        tally.attach(tally_client)
        raw.attach(raw_client)
        last = now // 60_000
        answer = counters.count_window(tally_client, settings, COUNTERS[1], last - 1439, last, now)
        raw_count = raw_events_24h(raw_client, settings, COUNTERS[1], now)
    assert answer.count == truth == raw_count, (answer.count, truth, raw_count)
    r, t = raw.total(), tally.total()
    return [
        f"| {volume:,} | raw events Query | {r.requests} | {r.items_read:,} | {r.read_units:,.1f} |",
        f"| {volume:,} | Tally BatchGetItem | {t.requests} | {answer.keys_read} keys, {t.items_read} found | {t.read_units:,.1f} |",
    ]


def raw_events_24h(dynamodb: Any, settings: Settings, counter: str, now: int) -> int:
    """Count from the raw events: Query every quarter-hour partition x write shard of 24 hours."""
    total = 0
    for quarter in range((now - 86_400_000) // 900_000, now // 900_000 + 1):
        for shard in range(settings.event_write_shards):
            request: dict[str, Any] = {
                "TableName": settings.events_table,
                "KeyConditionExpression": "pk = :pk",
                "FilterExpression": "#c = :c AND #t >= :from",
                "ExpressionAttributeNames": {"#c": "counter", "#t": "time"},
                "ExpressionAttributeValues": {
                    ":pk": {"S": events.partition_key(quarter * 900_000, shard)},
                    ":c": {"S": counter},
                    ":from": {"N": str((now // 60_000 - 1439) * 60_000)},
                },
                "Select": "COUNT",
            }
            while True:
                response = dynamodb.query(**request)
                total += response["Count"]
                if "LastEvaluatedKey" not in response:
                    break
                request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--read-volumes", default="10000,100000")
    args = parser.parse_args(argv)
    print(
        f"## Writes: {args.events:,} events, {len(COUNTERS)} counters, stream batches of {args.batch}, per 1,000 events\n"
    )
    print(
        "| scenario | design | requests | write units | WCU ratio vs seed | 24 h count after every batch twice | seconds |"
    )
    print("|---|---|---|---|---|---|---|")
    for scenario in SCENARIOS:
        for line in run_writes(scenario, args.events, args.batch):
            print(line, flush=True)
    print("\n## Reads: one 24-hour count\n")
    print("| events stored | design | requests | items read | read units |")
    print("|---|---|---|---|---|")
    for volume in (int(v) for v in args.read_volumes.split(",") if v):
        for line in run_reads(volume):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
