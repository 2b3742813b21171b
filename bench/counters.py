"""Windowed counters against the seed's design (counting-on-dynamodb), in one run on moto.

    python -m bench.counters [--events 5000] [--counters 3,30,1000,10000] [--rates 1,100,5000]
                             [--batches 100,1000] [--read-volumes 10000,100000]

Writes, a sweep over the number of counters, the ingest rate and the stream batch size: the
same events go through Tally's stream handler and through the seed's (two UpdateItem calls per
event, hour and minute); every batch is then delivered a second time, as Lambda may, and every
bucket Tally stored is compared with a brute-force count of the events (the seed's 24-hour
counts likewise). Write units are computed from item sizes (bench.metering), per 1,000 events.
Events are live (event time = ingest time) with generated ids, spread over the events table's
write shards and read from one stream shard; further rows: client ids (a marker claim per
event), a backfill whose event times spread over 30 hours, and a hot counter (90% of the
traffic on one counter, one stream shard per write shard applied concurrently by threads).

Columns: write units per 1,000 events and their ratio to the seed's, and of those the catalog's
(`GET /counters`: one log item per batch naming the counters whose day bucket it created, and
the scheduled fold of those names into the catalog's pages, run once at the end); writes (requests) per 1,000
events; the largest item in the counts table (bytes); the most writes one item takes per
second of ingest (DynamoDB allows 1,000 write units per second per partition); whether every
bucket is exact after every batch was delivered twice.

Reads: a 24-hour count for one of 3 counters when 10,000 and 100,000 events are stored:
Tally's BatchGetItem against a Query over the raw events of the last 24 hours.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench import env

env.prepare()

import boto3  # noqa: E402
from boto3.dynamodb.types import TypeSerializer  # noqa: E402
from moto import mock_aws  # noqa: E402

from bench.metering import Meter, MotoProbe, item_size, write_units  # noqa: E402
from chalicelib.core import catalog, timebuckets  # noqa: E402
from chalicelib.core.settings import Settings  # noqa: E402
from chalicelib.counters import catalog as counter_catalog  # noqa: E402
from chalicelib.counters import layout, stream  # noqa: E402
from chalicelib.counters import reads as counters  # noqa: E402
from chalicelib.counters.layout import bucket_sort_key  # noqa: E402
from chalicelib.events import ingest as events  # noqa: E402
from chalicelib.events import stream_records  # noqa: E402
from tools import resources  # noqa: E402

COUNTERS = ["jobs.provider-1", "jobs.provider-2", "jobs.provider-3"]  # the read rows
SHARD = "shardId-00000001795000000000-bench0000"
SEED_TABLE = "seed-counts"
HOUR_MS = 3_600_000
FIRST_SEQUENCE = 1_100_000_000_017_454_423_009  # as moto numbers a stream
SEED_SAMPLE = 300
_SERIALIZER = TypeSerializer()


@dataclass(frozen=True)
class Scenario:
    name: str
    ingest_per_second: float
    batch: int
    spread_hours: float = 0  # 0: event time = ingest time
    client_ids: bool = False
    hot: bool = False  # 90% of events on one counter; stream shards applied concurrently
    counters: int = 3


def counter_names(n: int) -> list[str]:
    return COUNTERS[:n] if n <= len(COUNTERS) else [f"customer-{k:05d}" for k in range(n)]


def sweep(rates: list[float], batch_sizes: list[int], counter_counts: list[int]) -> list[Scenario]:
    rows = [
        Scenario(f"{rate:,g}/s", rate, batch, counters=n)
        for n in counter_counts
        for batch in batch_sizes
        for rate in rates
    ]
    top = max(rates)
    for n in (min(counter_counts), max(counter_counts)):
        rows += [Scenario(f"{top:,g}/s, client ids", top, batch, client_ids=True, counters=n) for batch in batch_sizes]
    few = min(counter_counts)
    rows += [
        Scenario(f"{top:,g}/s, hot counter, 4 shards at once", top, batch, hot=True, counters=few)
        for batch in batch_sizes
    ]
    rows.append(Scenario("backfill over 30 h, 100/s", 100, min(batch_sizes), spread_hours=30, counters=few))
    return rows


def make_items(
    count: int, scenario: Scenario, start_ms: int, settings: Settings, rng: random.Random
) -> list[dict[str, Any]]:
    items = []
    names = counter_names(scenario.counters)
    for i in range(count):
        ingest = start_ms + int(i * 1000 / scenario.ingest_per_second)
        t = ingest - rng.randrange(int(scenario.spread_hours * HOUR_MS)) if scenario.spread_hours else ingest
        counter = names[0] if scenario.hot and rng.random() < 0.9 else rng.choice(names)
        event_id = f"client-{i}" if scenario.client_ids else f"gen-{i}"
        event = events.Event(counter, event_id, t, 7 * 86400, id_given=scenario.client_ids)
        items.append({k: _SERIALIZER.serialize(v) for k, v in events.to_item(event, ingest, settings).items()})
    return items


def stream_records_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "eventID": f"e{i}",
            "eventName": "INSERT",
            "dynamodb": {
                "NewImage": item,
                "SequenceNumber": str(FIRST_SEQUENCE + i),
                "ApproximateCreationDateTime": int(item["ingested_at"]["N"]) / 1000,
            },
        }
        for i, item in enumerate(items)
    ]


def stream_batches(items: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    records = stream_records_of(items)
    return [records[i : i + size] for i in range(0, len(records), size)]


def shard_batches(items: list[dict[str, Any]], size: int) -> dict[str, list[list[dict[str, Any]]]]:
    """One stream shard per write shard, each cut into batches."""
    shards: dict[str, list[dict[str, Any]]] = {}
    for record in stream_records_of(items):
        shards.setdefault(f"shardId-{record['dynamodb']['NewImage']['pk']['S'].split('#')[1]}", []).append(record)
    return {shard: [records[i : i + size] for i in range(0, len(records), size)] for shard, records in shards.items()}


def deliver(client: Any, settings: Settings, batch: list[dict[str, Any]], now: int, shard: str = SHARD) -> Any:
    """One Lambda invocation's worth: the batch as Lambda sends it with a tumbling window, at
    `now` or, earlier, one second after its last record was ingested (the clock moves through the
    hours of a slow ingest as it does on AWS: hourly and daily work shows)."""
    event = {"Records": batch, "shardId": shard, "state": {}}
    at = max((int(r["dynamodb"]["NewImage"]["ingested_at"]["N"]) for r in batch), default=now) + 1000
    return stream.apply_stream_batch(client, settings, stream_records.from_lambda_event(event), min(now, at))


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


class ItemWrites:
    """Counts successful writes per item key on a client (botocore hooks), to find the hottest item."""

    def __init__(self) -> None:
        self.writes: Counter[str] = Counter()
        self.catalog = 0.0  # write units of CATALOG# items: log items, the fold's pages and deletes

    def attach(self, client: Any) -> None:
        def after(params: dict[str, Any], parsed: dict[str, Any], model: Any, **_: Any) -> None:
            if parsed.get("Error"):
                return
            if model.name in ("UpdateItem", "PutItem", "DeleteItem"):
                key = params.get("Key") or {k: params["Item"][k] for k in ("pk", "sk") if k in params["Item"]}
                self.writes[repr(key)] += 1
                if str(key.get("pk", {}).get("S", "")).startswith("CATALOG#"):
                    self.catalog += write_units(item_size(params["Item"])) if "Item" in params else 1
            elif model.name == "TransactWriteItems":
                for entry in params["TransactItems"]:
                    op = next(iter(entry.values()))
                    self.writes[repr(op.get("Key") or {k: op["Item"][k] for k in ("pk", "sk")})] += 1

        def keep_params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            context["item_writes"] = dict(params)

        def after_call(parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
            after(context.pop("item_writes", {}), parsed, model)

        client.meta.events.register("before-parameter-build.dynamodb.*", keep_params)
        client.meta.events.register("after-call.dynamodb.*", after_call)

    def hottest(self) -> int:
        return max(self.writes.values(), default=0)


@dataclass
class Written:
    usage: dict[str, float]
    transactions: float  # writes (requests) per 1,000 events
    catalog_units: float  # of the write units, the catalog's
    largest_item: int
    hottest_per_second: float
    exact: bool
    seconds: float


def apply_tally(client: Any, settings: Settings, scenario: Scenario, items: list[dict[str, Any]], now: int) -> int:
    """Every batch once, as Lambda would; returns the writes made."""
    if not scenario.hot:
        return sum(
            deliver(client, settings, batch, now).transactions for batch in stream_batches(items, scenario.batch)
        )
    totals: list[int] = []

    def run_shard(shard: str, batches: list[list[dict[str, Any]]]) -> None:
        # a shard's batches one after another, shards side by side
        totals.append(sum(deliver(client, settings, batch, now, shard).transactions for batch in batches))

    threads = [
        threading.Thread(target=run_shard, args=(shard, b)) for shard, b in shard_batches(items, scenario.batch).items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(totals)


def exact_buckets(dynamodb: Any, settings: Settings, items: list[dict[str, Any]]) -> bool:
    """Every bucket item equals a brute-force count of the events in it (and none is missing)."""
    truth: Counter[tuple[str, str]] = Counter()
    for item in items:
        for bucket in timebuckets.buckets_for(int(item["time"]["N"])):
            truth[(item["counter"]["S"], bucket_sort_key(bucket.resolution, bucket.index))] += 1
    stored: Counter[tuple[str, str]] = Counter()
    for i in scan_all(dynamodb, settings.counts_table):
        if not i["pk"]["S"].startswith("CTR#"):
            continue
        counter, sk = i["pk"]["S"][len("CTR#") :], i["sk"]["S"]
        stored[(counter, sk)] += int(i["n"]["N"])
        if sk.startswith("d#"):  # a quiet day's first minutes, held inline by its day item
            day = int(sk.split("#")[1])
            for minute, k in layout.inline_minutes(i).items():
                stored[(counter, bucket_sort_key("hour", day * 24 + minute // 60))] += k
    return dict(stored) == dict(truth)


def run_writes(scenario: Scenario, count: int, seed_cache: dict[tuple[Any, ...], Written]) -> list[Written]:
    """Tally's row and the seed's (the seed's cost does not depend on the batch size: cached)."""
    settings = Settings.from_env({})
    rng = random.Random(42)
    ingest_seconds = count / scenario.ingest_per_second
    with mock_aws():
        plain, probe = fresh_stack(settings)
        start = 1_795_000_000_000
        items = make_items(count, scenario, start, settings, rng)
        now = start + int(ingest_seconds * 1000) + 1000
        last = now // 60_000
        sampled = counter_names(scenario.counters)[:3]
        truth = {
            c: sum(1 for i in items if i["counter"]["S"] == c and last - 1439 <= int(i["time"]["N"]) // 60_000)
            for c in sampled
        }
        session = boto3.session.Session(region_name="us-east-1")
        tally_client = session.client("dynamodb")
        tally, hot = Meter(probe), ItemWrites()
        tally.attach(tally_client)
        hot.attach(tally_client)
        began = time.perf_counter()
        transactions = apply_tally(tally_client, settings, scenario, items, now)
        # The scheduled fold of the counters' listing, once for the run (it runs every
        # CATALOG_FOLD_MINUTES; a run's names are what one fold merges at most).
        catalog.fold(tally_client, settings, counter_catalog.KIND, now)
        tally_seconds = time.perf_counter() - began
        usage = tally.total().per(count)
        if scenario.hot:  # at-least-once: every batch again
            for shard, batches in shard_batches(items, scenario.batch).items():
                for batch in batches:
                    deliver(plain, settings, batch, now, shard)
        else:
            for batch in stream_batches(items, scenario.batch):
                deliver(plain, settings, batch, now)
        tally_ok = exact_buckets(plain, settings, items) and all(
            counters.count_window(plain, settings, c, last - 1439, last, now).count == truth[c] for c in sampled
        )
        largest = max(item_size(i) for i in scan_all(plain, settings.counts_table))
        tally_row = Written(
            usage,
            transactions * 1000 / count,
            hot.catalog * 1000 / count,
            largest,
            hot.hottest() / ingest_seconds,
            tally_ok,
            tally_seconds,
        )
        key = (scenario.ingest_per_second, scenario.spread_hours, scenario.hot, scenario.counters, count)
        if key not in seed_cache:
            # Two UpdateItem calls per event whatever the batch: a sample of the same events
            # prices it (moto is slow at one call per event).
            sample = items[:SEED_SAMPLE]
            seed_client = session.client("dynamodb")
            seed, seed_hot = Meter(probe), ItemWrites()
            seed.attach(seed_client)
            seed_hot.attach(seed_client)
            began = time.perf_counter()
            for batch in stream_batches(sample, scenario.batch):
                seed_apply(seed_client, batch)
            seed_seconds = time.perf_counter() - began
            for batch in stream_batches(sample, scenario.batch):
                seed_apply(plain, batch)
            sample_truth = {
                c: sum(1 for i in sample if i["counter"]["S"] == c and last - 1439 <= int(i["time"]["N"]) // 60_000)
                for c in sampled
            }
            seed_ok = {c: seed_24h(plain, c, now) for c in sampled} == sample_truth
            seed_cache[key] = Written(
                seed.total().per(len(sample)),
                2000,  # UpdateItem calls per 1,000 events
                0,
                max(item_size(i) for i in scan_all(plain, SEED_TABLE)),
                seed_hot.hottest() / (len(sample) / scenario.ingest_per_second),
                seed_ok,
                seed_seconds,
            )
    return [seed_cache[key], tally_row]


def scan_all(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {"TableName": table}
    while True:
        page = dynamodb.scan(**request)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def write_lines(scenario: Scenario, seed: Written, tally: Written) -> list[str]:
    ratio = tally.usage["write_units"] / seed.usage["write_units"]
    return [
        f"| {scenario.counters:,} | {scenario.name} | {scenario.batch:,} | Tally | {tally.usage['write_units']:,.0f} | "
        f"{ratio:.3f}x | {tally.catalog_units:,.0f} | {tally.transactions:,.1f} | {tally.largest_item:,} | "
        f"{tally.hottest_per_second:,.1f} | {'yes' if tally.exact else 'NO'} | {tally.seconds:.1f} |",
        f"| | | | seed | {seed.usage['write_units']:,.0f} | 1x | | {seed.transactions:,.0f} | "
        f"{seed.largest_item:,} | {seed.hottest_per_second:,.1f} | {'yes' if seed.exact else 'no'} | {seed.seconds:.1f} |",
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
            deliver(plain, settings, batch, now)
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
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--counters", default="3,30,1000,10000", help="numbers of counters to sweep")
    parser.add_argument("--rates", default="1,100,5000")
    parser.add_argument("--batches", default="100,1000")
    parser.add_argument("--read-volumes", default="10000,100000")
    args = parser.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",") if r]
    batch_sizes = [int(b) for b in args.batches.split(",") if b]
    counter_counts = [int(c) for c in args.counters.split(",") if c]
    print(f"## Writes: {args.events:,} events per row, per 1,000 events\n")
    print(
        "| counters | ingest | batch | design | write units | vs seed | of which catalog | writes "
        "| largest item, bytes | hottest item, writes/s | exact after every batch twice | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    seed_cache: dict[tuple[Any, ...], Written] = {}
    for scenario in sweep(rates, batch_sizes, counter_counts):
        seed, tally = run_writes(scenario, args.events, seed_cache)
        for line in write_lines(scenario, seed, tally):
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
