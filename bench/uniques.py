"""Unique counts against the seed's design, in one run on moto.

    python -m bench.uniques [--items 10000] [--trials 16]

1. Back-end merge of one batch: the seed reads a pickled sketch, calls `add` per item and
   writes the pickle back. The library's `add_bulk` still hashes item by item in Python, so it
   is shown too; Tally hashes items at the front end with the library's hash and its back end
   applies them vectorised, with one consistent read and one conditional write per sketch. Capacity units are computed
   from item sizes by AWS's rules (moto's ConsumedCapacity is not reliable).
2. Stored bytes per sketch against the seed's pickle, at several cardinalities.
3. Measured relative error next to Redis's published 0.81%.
"""

from __future__ import annotations

import argparse
import math
import pickle
import statistics
import time
from typing import Any

from bench import env

env.prepare()

from hyperloglog import HyperLogLog  # noqa: E402
from moto import mock_aws  # noqa: E402

from bench.metering import Meter, MotoProbe  # noqa: E402
from chalicelib.core.aws import AwsClients  # noqa: E402
from chalicelib.core.queues import Message  # noqa: E402
from chalicelib.core.settings import Settings  # noqa: E402
from chalicelib.uniques import api as uniques_api  # noqa: E402
from chalicelib.uniques import batches as uniques_batches  # noqa: E402
from chalicelib.uniques import sketch_encoding as sketches  # noqa: E402
from tools import resources  # noqa: E402

REDIS_STANDARD_ERROR = 0.0081
DENSE_REDIS_BYTES = 12 * 1024


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
    key = uniques_batches.sketch_key(name, 0)
    item = dynamodb.get_item(TableName=settings.counts_table, Key=key, ConsistentRead=True).get("Item")
    sketch = sketches.decode(bytes(item["sketch"]["B"])) if item else sketches.empty(p)
    sketch.add_bulk(items)
    dynamodb.put_item(
        TableName=settings.counts_table, Item={**key, "sketch": {"B": sketches.encode(sketch)}, "version": {"N": "1"}}
    )


def merge_throughput(clients: AwsClients, settings: Settings, n: int, rounds: int = 5) -> list[list[str]]:
    batches = [[f"https://example.com/visitor/{r}-{i}" for i in range(n)] for r in range(rounds)]
    step = uniques_batches.MAX_ITEMS
    started = time.perf_counter()
    messages = [
        [Message(f"m-{r}-{k}", "", uniques_api.message_body("tally", items[k : k + step])) for k in range(0, n, step)]
        for r, items in enumerate(batches)
    ]
    hashing_s = (time.perf_counter() - started) / rounds
    designs = [
        ("seed: pickle + add() per item", lambda db, r: seed_merge(db, settings.counts_table, "seed", batches[r])),
        ("library add_bulk(items) + compact form", lambda db, r: library_bulk_merge(db, settings, "lib", batches[r])),
        (
            "tally: pre-hashed bulk add + compact form",
            lambda db, r: uniques_batches.apply_messages(db, settings, messages[r], 0),
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
    bodies = [
        uniques_api.message_body("tally", items[k : k + uniques_batches.MAX_ITEMS])
        for k in range(0, n, uniques_batches.MAX_ITEMS)
    ]

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
        ("library add_bulk(items)", lambda: HyperLogLog(0.01).add_bulk(items)),
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
        sketch = sketches.from_hashes(p, sketches.item_hashes(f"size-{i}" for i in range(n)))
        ours = len(sketches.encode(sketch))
        seed = len(pickle.dumps(sketch, 2))
        target = 1024 if n < 100 else DENSE_REDIS_BYTES
        kind = "sparse" if sketches.encode(sketch)[3] == sketches.SPARSE else "dense"
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


def relative_errors(p: int, trials: int) -> list[list[str]]:
    rows = []
    for n in (1_000, 100_000):
        errors = []
        for t in range(trials):
            sketch = sketches.from_hashes(p, sketches.item_hashes(f"t{t}-{i}" for i in range(n)))
            errors.append((sketches.estimate(sketch) - n) / n)
        rms = math.sqrt(statistics.fmean(e * e for e in errors))
        rows.append(
            [
                f"{n:,}",
                str(trials),
                f"{rms:.2%}",
                f"{max(abs(e) for e in errors):.2%}",
                f"{sketches.standard_error(p):.2%}",
                f"{REDIS_STANDARD_ERROR:.2%}",
            ]
        )
    return rows


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([f"\n{title}", line(header), line(["-" * w for w in widths]), *map(line, rows)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=16)
    args = parser.parse_args(argv)
    settings = Settings.from_env({})
    p = sketches.precision_for(settings.uniques_error_rate)
    with mock_aws():
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        merge = merge_throughput(clients, settings, args.items)
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
            f"Back-end merge of a {args.items:,}-item batch into an existing sketch "
            "(moto, best of 3; capacity units of a 4th, metered)",
            ["design", "items/s", "ms", "RCU", "WCU"],
            merge,
        )
    )
    for label in list(rate)[1:]:
        print(f"  {label}: {rate[label] / seed_rate:.1f}x the seed")
    print(
        table(
            f"Stored bytes per sketch (precision {p}, {1 << p:,} registers)",
            ["distinct", "seed pickle", "tally", "smaller by", "target"],
            stored_sizes(p),
        )
    )
    print(
        table(
            "Relative error of the estimate",
            ["distinct", "trials", "RMS error", "worst", "theory 1.04/sqrt(m)", "Redis"],
            relative_errors(p, args.trials),
        )
    )


if __name__ == "__main__":
    main()
