"""Unique counts against the seed's design, in one run on moto.

    python -m bench.uniques [--items 10000] [--trials 40]

1. Back-end merge of one batch: the seed reads a pickled sketch, calls `add` per item and
   writes the pickle back. The library's `add_bulk` still hashes item by item in Python, so it
   is shown too; Tally hashes items at the front end with the library's hash and its back end
   applies them vectorised, with one consistent read and one conditional write per sketch. Capacity units are computed
   from item sizes by AWS's rules (moto's ConsumedCapacity is not reliable).
2. Stored bytes per sketch against the seed's pickle, at several cardinalities, and per hour
   sketch at 10, 100 and 1,000 distinct items (exact below 300).
3. Windows: keys, read units and bytes read for a 24-hour, 7-day and 30-day window over a month
   of data (against reading hour sketches only); the write cost of a 10,000-item batch whose
   item times spread over 24 hours, against the all-time-only back end.
4. Accuracy over windows against exact sets: relative RMSE at 10^3..10^6 distinct items in a
   window, next to Redis's published 0.81%, and exactness at 0-200.
"""

from __future__ import annotations

import argparse
import math
import pickle
import random
import statistics
import time
from typing import Any

from bench import env

env.prepare()

import numpy as np  # noqa: E402
from hyperloglog import HyperLogLog  # noqa: E402
from moto import mock_aws  # noqa: E402

from bench.metering import Meter, MotoProbe, item_size  # noqa: E402
from chalicelib.core import timebuckets  # noqa: E402
from chalicelib.core.aws import AwsClients  # noqa: E402
from chalicelib.core.queues import Message  # noqa: E402
from chalicelib.core.settings import Settings  # noqa: E402
from chalicelib.uniques import api as uniques_api  # noqa: E402
from chalicelib.uniques import batches as uniques_batches  # noqa: E402
from chalicelib.uniques import layout as uniques_keys  # noqa: E402
from chalicelib.uniques import sketches, windows  # noqa: E402
from tools import resources  # noqa: E402

REDIS_STANDARD_ERROR = 0.0081
DENSE_REDIS_BYTES = 12 * 1024
NOW = 1_795_000_000_000  # 2026-11-18T11:06:40Z
HOUR_MS = 3_600_000
RMSE_TARGET = 0.0085
# Any fixed key: the item key changes which registers items set, not how many or how well.
KEY = b"bench-item-key-" + bytes(range(32))


def body(name: str, items: list[str], time_ms: int = NOW) -> str:
    return uniques_batches.message_body(name, sketches.item_hashes(KEY, items), time_ms)


def merge_minutes(dynamodb: Any, settings: Settings, name: str, seen: list[tuple[int, int, str]]) -> int:
    """What the unique-count handler adds for items queued with `minute` (a site's visitors, for
    realtime): each batch (what one batching window gathers, at most UNIQUES_BATCH_SIZE messages)
    merges the sketch of every minute it holds. `seen`: (arrival ms, item time ms, item), in
    arrival order. The number of merges."""
    window_ms = max(settings.uniques_batching_window_seconds * 1000, 1)
    windows_of: dict[int, list[tuple[int, str]]] = {}
    for arrived, t, item in seen:
        windows_of.setdefault(arrived // window_ms, []).append((t, item))
    merges = 0
    for window, gathered in sorted(windows_of.items()):
        for start in range(0, len(gathered), settings.uniques_batch_size):
            by_minute: dict[int, list[str]] = {}
            for t, item in gathered[start : start + settings.uniques_batch_size]:
                by_minute.setdefault(t // timebuckets.MINUTE_MS, []).append(item)
            for minute, items in sorted(by_minute.items()):
                bucket = timebuckets.Bucket("minute", minute)
                expires = timebuckets.expires_at_s(bucket, uniques_batches.MINUTE_RETENTION_SECONDS)
                hashes = sketches.item_hashes(KEY, items)
                key = uniques_keys.bucket_key(name, bucket)
                uniques_batches.merge_into(dynamodb, settings, key, hashes, (window + 1) * window_ms, expires)
                merges += 1
    return merges


def random_hashes(rng: np.random.Generator, n: int) -> np.ndarray[Any, Any]:
    """n distinct uniformly random 64-bit item hashes (what SHA-1 gives distinct items)."""
    values = np.unique(rng.integers(0, 2**64, size=n + n // 1000 + 8, dtype=np.uint64, endpoint=False))
    return rng.permutation(values)[:n]


# -- the seed's back end (pickle, one add per item), on Tally's table ---------------------------


def seed_merge(dynamodb: Any, table: str, name: str, items: list[str]) -> None:
    key = {"pk": {"S": f"SEED#{name}"}, "sk": {"S": "shard-0"}}
    item = dynamodb.get_item(TableName=table, Key=key).get("Item")
    hll = pickle.loads(item["bin"]["B"]) if item else HyperLogLog(0.01)  # the seed's unsafe read
    for value in items:
        hll.add(value)
    dynamodb.put_item(TableName=table, Item={**key, "bin": {"B": pickle.dumps(hll, 2)}})


# -- the three measurements ---------------------------------------------------------------------


def library_bulk_merge(dynamodb: Any, settings: Settings, name: str, items: list[str]) -> None:
    """The library's add_bulk on the raw items, with Tally's storage: where the hashing goes."""
    p = sketches.precision_for(settings.uniques_error_rate)
    key = uniques_keys.shard_key(name, 0)
    item = dynamodb.get_item(TableName=settings.counts_table, Key=key, ConsistentRead=True).get("Item")
    sketch = (sketches.decode(bytes(item["sketch"]["B"])) if item else sketches.empty(p)).library()
    sketch.add_bulk(items)
    stored = sketches.Sketch(p, sketch.M, None, sketches.EXACT_LIMIT + 1)
    dynamodb.put_item(
        TableName=settings.counts_table, Item={**key, "sketch": {"B": sketches.encode(stored)}, "version": {"N": "1"}}
    )


def merge_throughput(clients: AwsClients, settings: Settings, n: int, rounds: int = 5) -> list[list[str]]:
    batches = [[f"https://example.com/visitor/{r}-{i}" for i in range(n)] for r in range(rounds)]
    step = uniques_batches.MAX_ITEMS
    started = time.perf_counter()
    messages = [
        [Message(f"m-{r}-{k}", "", body("tally", items[k : k + step])) for k in range(0, n, step)]
        for r, items in enumerate(batches)
    ]
    hashing_s = (time.perf_counter() - started) / rounds
    designs = [
        ("seed: pickle + add() per item", lambda db, r: seed_merge(db, settings.counts_table, "seed", batches[r])),
        ("library add_bulk(items) + compact form", lambda db, r: library_bulk_merge(db, settings, "lib", batches[r])),
        (
            "tally: pre-hashed bulk add + compact form",
            lambda db, r: uniques_batches.apply_messages(db, settings, messages[r], NOW),
        ),
    ]
    probe = MotoProbe(clients.dynamodb, region=settings.aws_region)
    rows = []
    for label, run in designs:
        timings = []
        for r in range(rounds - 1):  # every round merges new items; round 0 creates the sketch
            started = time.perf_counter()
            run(clients.dynamodb, r)
            timings.append(time.perf_counter() - started)
        meter = Meter(probe)  # the last round is metered, untimed: metering reads items too
        run(meter.attach(AwsClients(settings).dynamodb), rounds - 1)
        capacity = meter.total()
        best = min(timings[1:])  # merges into an existing sketch
        rows.append(
            [label, f"{n / best:,.0f}", f"{best * 1000:.1f}", f"{capacity.read_units:g}", f"{capacity.write_units:g}"]
        )
    tally_s = float(rows[-1][2]) / 1000
    rows.append(
        [
            "tally incl. front-end hashing (spread over POSTs)",
            f"{n / (tally_s + hashing_s):,.0f}",
            f"{(tally_s + hashing_s) * 1000:.1f}",
            "",
            "",
        ]
    )
    return rows


def merge_compute(n: int, rounds: int = 5) -> list[list[str]]:
    """The sketch update alone, no storage: what the back end spends per item."""
    items = [f"https://example.com/visitor/{i}" for i in range(n)]
    bodies = [body("tally", items[k : k + uniques_batches.MAX_ITEMS]) for k in range(0, n, uniques_batches.MAX_ITEMS)]

    def seed() -> None:
        hll = HyperLogLog(0.01)
        for value in items:
            hll.add(value)

    def tally() -> None:
        hashes = b"".join(uniques_batches.parse_message(body)[1] for body in bodies)
        sketches.from_hashes(14, hashes)

    rows = []
    for label, run in (
        ("seed: add() per item", seed),
        ("library add_bulk(items)", lambda: HyperLogLog(0.01).add_bulk(items)),  # type: ignore[func-returns-value]
        ("tally: parse messages + pre-hashed bulk add", tally),
    ):
        timings = []
        for _ in range(rounds):
            started = time.perf_counter()
            run()
            timings.append(time.perf_counter() - started)
        rows.append([label, f"{n / min(timings):,.0f}", f"{min(timings) * 1000:.1f}"])
    return rows


def stored_sizes(p: int) -> list[list[str]]:
    rows = []
    for n in (10, 99, 1_000, 100_000, 1_000_000):
        sketch = sketches.from_hashes(p, sketches.item_hashes(KEY, (f"size-{i}" for i in range(n))))
        ours = len(sketches.encode(sketch))
        seed = len(pickle.dumps(sketch.library(), 2))
        target = 1024 if n < 100 else DENSE_REDIS_BYTES
        kind = {sketches.EXACT: "exact", sketches.SPARSE: "sparse", sketches.DENSE: "dense"}[sketches.encode(sketch)[3]]
        rows.append(
            [
                f"{n:,}",
                f"{seed:,}",
                f"{ours:,} ({kind})",
                f"{seed / ours:.1f}x",
                f"<= {target:,}: {'ok' if ours <= target else 'MISSED'}",
            ]
        )
    return rows


def window_accuracy(p: int, trials: int) -> tuple[list[list[str]], list[str]]:
    """Items spread over the buckets of a 30-day window (whole days, hours at both ends),
    bucket sketches built as the back end builds them, merged as a read merges them."""
    rng = np.random.default_rng(2026)
    last_hour = NOW // HOUR_MS
    first, last = timebuckets.hours_ending(last_hour * 60 + 59, 30 * 1440 - 7 * 60)
    plan = windows.cover(first * 60, (last + 1) * 60, -(10**9))
    rows = []
    worst = 0.0
    for n in (1_000, 10_000, 100_000, 1_000_000):
        errors = []
        for _ in range(trials if n < 1_000_000 else max(trials // 4, 8)):
            values = random_hashes(rng, n)
            bucket_of = rng.integers(0, len(plan), size=n)
            # an item seen in two buckets counts once in the window: repeat a tenth elsewhere
            repeats = values[: n // 10]
            parts = []
            for b in range(len(plan)):
                part = sketches.empty(p)
                sketches.add_values(part, values[bucket_of == b])
                sketches.add_values(part, repeats[rng.integers(0, len(plan), size=len(repeats)) == b])
                parts.append(part)
            errors.append((sketches.estimate(sketches.merge(parts, p)) - n) / n)
        rmse = math.sqrt(statistics.fmean(e * e for e in errors))
        worst = max(worst, rmse)
        rows.append(
            [
                f"{n:,}",
                str(len(errors)),
                f"{rmse:.2%}",
                f"{max(abs(e) for e in errors):.2%}",
                f"{sketches.standard_error(p):.2%}",
                f"<= {RMSE_TARGET:.2%}: {'ok' if rmse <= RMSE_TARGET else 'MISSED'}",
            ]
        )
    exact_misses = 0
    for n in range(0, 201):
        values = random_hashes(rng, n)
        bucket_of = rng.integers(0, len(plan), size=n)
        parts = []
        for b in range(len(plan)):
            part = sketches.empty(p)
            sketches.add_values(part, values[bucket_of == b])
            parts.append(part)
        exact_misses += sketches.estimate(sketches.merge(parts, p)) != n
    notes = [
        f"window of {len(plan)} sketches; worst RMSE {worst:.2%} (Redis documents 0.81% standard error)",
        f"exact at 0-200 distinct items: {201 - exact_misses}/201 windows exact",
    ]
    return rows, notes


def hour_sketch_bytes(settings: Settings, p: int) -> list[list[str]]:
    rows = []
    for n in (10, 100, 1_000):
        sketch = sketches.from_hashes(p, sketches.item_hashes(KEY, (f"h-{i}" for i in range(n))))
        data = sketches.encode(sketch)
        bucket = timebuckets.Bucket("hour", NOW // HOUR_MS)
        stored = {
            **uniques_keys.bucket_key("visitors.home", bucket),
            "sketch": {"B": data},
            "version": {"N": "12"},
            "updated_at": {"S": "2026-11-18T11:06:40.000Z"},
            "expires_at": {"N": str(timebuckets.expires_at_s(bucket, settings.uniques_hour_retention_seconds))},
        }
        kind = {sketches.EXACT: "exact", sketches.SPARSE: "sparse", sketches.DENSE: "dense"}[data[3]]
        rows.append([f"{n:,}", f"{len(data):,} ({kind})", f"{item_size(stored):,}", str(sketches.estimate(sketch))])
    return rows


def populate_month(clients: AwsClients, settings: Settings, per_hour: int) -> int:
    """31 days of items for one name, `per_hour` distinct per hour, applied as batches would be
    (hour sketches older than their retention are not written)."""
    rng = np.random.default_rng(31)
    last_hour = NOW // HOUR_MS
    written = 0
    for day in range(31):
        messages = []
        for h in range(24):
            hour = last_hour - day * 24 - h
            values = random_hashes(rng, per_hour).astype(">u8").tobytes()
            for k in range(0, len(values), 8 * uniques_batches.MAX_ITEMS):
                raw = values[k : k + 8 * uniques_batches.MAX_ITEMS]
                messages.append(
                    Message(f"p-{day}-{h}-{k}", "", uniques_batches.message_body("month", raw, hour * HOUR_MS + 1_000))
                )
        written += uniques_batches.apply_messages(clients.dynamodb, settings, messages, NOW).details["writes"]
    return written


def window_reads(clients: AwsClients, settings: Settings) -> list[list[str]]:
    probe = MotoProbe(clients.dynamodb, region=settings.aws_region)
    rows = []
    for window, hours in (("24h", 24), ("7d", 7 * 24), ("30d", 30 * 24)):
        meter = Meter(probe)
        dynamodb = meter.attach(AwsClients(settings).dynamodb)
        first, last = timebuckets.hours_ending(NOW // 60_000, hours * 60)
        answer = uniques_api.window_cardinality(
            dynamodb, settings, ["month"], uniques_api.hour_span((first, last)), NOW
        )
        usage = meter.total()
        plan = windows.cover(
            first * 60,
            (last + 1) * 60,
            timebuckets.first_live_index("hour", NOW, settings.uniques_hour_retention_seconds),
        )
        read_bytes = sum(
            item_size(
                probe.get_item(TableName=settings.counts_table, Key=uniques_keys.bucket_key("month", b)).get("Item")
            )
            for b in plan
        )
        rows.append(
            [
                window,
                str(answer["keys_read"]),
                str(meter.by_operation["BatchGetItem"].requests),
                f"{usage.read_units:g}",
                f"{read_bytes / 1024:,.1f}",
                str(hours),
                f"{answer['cardinality']:,}",
            ]
        )
    return rows


def write_cost(clients: AwsClients, settings: Settings, n: int) -> list[list[str]]:
    """A batch of n items whose times spread evenly over 24 hours, merged into existing sketches."""
    probe = MotoProbe(clients.dynamodb, region=settings.aws_region)
    rng = np.random.default_rng(24)
    per = 250
    last_hour = NOW // HOUR_MS

    def batch(tag: str) -> list[Message]:
        values = random_hashes(rng, n).astype(">u8").tobytes()
        return [
            Message(
                f"{tag}-{k}",
                "",
                uniques_batches.message_body(
                    "spread", values[k * 8 : (k + per) * 8], (last_hour - (k // per) % 24) * HOUR_MS + 60_000
                ),
            )
            for k in range(0, n, per)
        ]

    rows = []
    for label, apply in (
        (
            "all-time only (before windows)",
            lambda db, msgs: uniques_batches.merge_into(
                db,
                settings,
                uniques_keys.shard_key("spread-all", 0),
                b"".join(uniques_batches.parse_message(m.body)[1] for m in msgs),
                NOW,
                None,
            ),
        ),
        (
            "before quarter sketches: all-time + day + hour",
            lambda db, msgs: without_quarters(lambda: uniques_batches.apply_messages(db, settings, msgs, NOW)),
        ),
        (
            "tally: all-time + day + hour + quarter sketches",
            lambda db, msgs: uniques_batches.apply_messages(db, settings, msgs, NOW),
        ),
    ):
        apply(clients.dynamodb, batch("warm"))  # the sketches exist: the batch updates them
        meter = Meter(probe)
        apply(meter.attach(AwsClients(settings).dynamodb), batch("measured"))
        usage = meter.total()
        rows.append(
            [
                label,
                str(meter.total("PutItem").items_written),
                f"{meter.total('PutItem', 'UpdateItem').write_units:g}",
                f"{usage.read_units:g}",
                str(meter.total("UpdateItem").requests),
            ]
        )
    return rows


def without_quarters(run: Any) -> Any:
    """Run with the back end writing no quarter-hour sketches: the design before local days."""
    real = windows.buckets_for
    windows.buckets_for = lambda t_ms: [b for b in real(t_ms) if b.resolution != "quarter"]  # type: ignore[assignment]
    try:
        return run()
    finally:
        windows.buckets_for = real  # type: ignore[assignment]


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([f"\n{title}", line(header), line(["-" * w for w in widths]), *map(line, rows)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--per-hour", type=int, default=1_000, help="distinct items per hour in the month of data")
    args = parser.parse_args(argv)
    random.seed(0)
    settings = Settings.from_env({})
    p = sketches.precision_for(settings.uniques_error_rate)
    with mock_aws():
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        merge = merge_throughput(clients, settings, args.items)
        writes = write_cost(clients, settings, args.items)
        populate_month(clients, settings, args.per_hour)
        reads = window_reads(clients, settings)
    compute = merge_compute(args.items)
    print(
        table(
            f"Sketch update for a {args.items:,}-item batch, no storage (best of 5)",
            ["design", "items/s", "ms"],
            compute,
        )
    )
    for row in compute[1:]:
        print(f"  {row[0]}: {float(row[1].replace(',', '')) / float(compute[0][1].replace(',', '')):.1f}x the seed")
    rate = {row[0]: float(row[1].replace(",", "")) for row in merge}
    seed_rate = rate["seed: pickle + add() per item"]
    print(
        table(
            f"Back-end merge of a {args.items:,}-item batch into an existing sketch, item times now "
            "(moto, best of 3; capacity units of a 4th, metered)",
            ["design", "items/s", "ms", "RCU", "WCU"],
            merge,
        )
    )
    for label in list(rate)[1:]:
        print(f"  {label}: {rate[label] / seed_rate:.1f}x the seed")
    print(
        table(
            f"Write cost of a {args.items:,}-item batch with item times spread over 24 hours, into existing sketches",
            ["back end", "sketch writes", "WCU", "RCU", "name-index writes"],
            writes,
        )
    )
    print(
        f"  windows cost {float(writes[2][2]) / float(writes[0][2]):.1f}x the write units of the all-time-only back end; "
        f"quarter sketches {float(writes[2][2]) / float(writes[1][2]):.2f}x those of the day and hour sketches alone"
    )
    print(
        table(
            f"A window read over 31 days of {args.per_hour:,} distinct items per hour (one BatchGetItem each)",
            ["window", "keys", "calls", "RCU", "KB read", "hour sketches only: keys", "cardinality"],
            reads,
        )
    )
    print(
        table(
            f"Stored bytes per sketch (precision {p}, {1 << p:,} registers)",
            ["distinct", "seed pickle", "tally", "smaller by", "target"],
            stored_sizes(p),
        )
    )
    print(
        table(
            "Bytes per hour sketch (sketch alone; whole DynamoDB item with keys and attributes)",
            ["distinct", "sketch bytes", "item bytes", "answer"],
            hour_sketch_bytes(settings, p),
        )
    )
    accuracy, notes = window_accuracy(p, args.trials)
    print(
        table(
            "Accuracy of a 30-day window's answer against the exact set",
            ["distinct", "trials", "relative RMSE", "worst", "theory 1.04/sqrt(m)", "target"],
            accuracy,
        )
    )
    for note in notes:
        print(f"  {note}")


if __name__ == "__main__":
    main()
