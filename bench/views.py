"""Exact view counters: Tally's batched transactions vs the seed's one transaction per view.

    python -m bench.views [--views 10000] [--urls 50] [--duplicates 0.1] [--batches 100,1000]

The same workload, on moto, through both designs: views spread over URLs, a share of the
messages delivered again later (SQS's at-least-once), cut into queue batches. The seed
writes a marker and an increment of 1 in one transaction per view; Tally writes the markers
of a batch with one increment of K per URL, up to 100 items per transaction, after reading
which markers already exist. Both must end with exact counts.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from bench import env

env.prepare()

from botocore.exceptions import ClientError  # noqa: E402

from bench.metering import Meter, MotoProbe  # noqa: E402
from chalicelib.core.queues import Message  # noqa: E402
from chalicelib.views import api as views_api  # noqa: E402
from chalicelib.views import batches as views_batches  # noqa: E402
from chalicelib.views import keys as view_keys  # noqa: E402
from chalicelib.views.keys import View  # noqa: E402

T0 = 1_795_000_000_000
SEED_TABLE = "bench-seed-views"


def workload(n: int, urls: int, duplicates: float, seed: int = 1) -> tuple[list[View], dict[str, int]]:
    """n deliveries: distinct views plus re-deliveries of earlier ones at random later places."""
    rng = random.Random(seed)
    distinct = [
        View(f"https://blog.example/{rng.randrange(urls)}", T0 + i * 997, f"client-{rng.randrange(5000)}")
        for i in range(round(n * (1 - duplicates)))
    ]
    deliveries = list(distinct)
    for _ in range(n - len(distinct)):
        position = rng.randrange(len(deliveries) + 1)
        deliveries.insert(position, rng.choice(deliveries[:position] or distinct))
    expected: dict[str, int] = {}
    for v in distinct:
        expected[v.url] = expected.get(v.url, 0) + 1
    return deliveries, expected


def seed_design(dynamodb: Any, plain: Any, batches: list[list[View]]) -> dict[str, int]:
    """One TransactWriteItems per view: a conditional marker put and an increment of 1."""
    for batch in batches:
        for v in batch:
            pk = {"S": f"URL#{v.url}"}
            try:
                dynamodb.transact_write_items(
                    TransactItems=[
                        {
                            "Put": {
                                "TableName": SEED_TABLE,
                                "Item": {
                                    "pk": pk,
                                    "sk": {"S": f"T#{v.time_ms}#CID#{v.client_id}"},
                                    "expires_at": {"N": str(T0 // 1000 + 7 * 86400)},
                                },
                                "ConditionExpression": "attribute_not_exists(pk) AND attribute_not_exists(sk)",
                            }
                        },
                        {
                            "Update": {
                                "TableName": SEED_TABLE,
                                "Key": {"pk": pk, "sk": {"S": "STATISTICS"}},
                                "UpdateExpression": "SET #v = if_not_exists(#v, :zero) + :one",
                                "ExpressionAttributeNames": {"#v": "views"},
                                "ExpressionAttributeValues": {":zero": {"N": "0"}, ":one": {"N": "1"}},
                            }
                        },
                    ]
                )
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "TransactionCanceledException":
                    raise
    counts: dict[str, int] = {}
    for url in {v.url for batch in batches for v in batch}:
        item = plain.get_item(TableName=SEED_TABLE, Key={"pk": {"S": f"URL#{url}"}, "sk": {"S": "STATISTICS"}})
        counts[url] = int(item["Item"]["views"]["N"])
    return counts


def tally_design(dynamodb: Any, plain: Any, sqs: Any, settings: Any, batches: list[list[View]]) -> dict[str, int]:
    for number, batch in enumerate(batches):
        messages = [Message(f"{number}-{i}", f"r-{number}-{i}", view_keys.to_message(v)) for i, v in enumerate(batch)]
        views_batches.apply_messages(dynamodb, sqs, settings, messages, T0)
    urls = {v.url for batch in batches for v in batch}
    return {url: views_api.count(plain, settings, url, None, None, T0)["views"] for url in urls}


def per_thousand(meter: Meter, n: int) -> dict[str, float]:
    transactions, usage = meter.total("TransactWriteItems").per(n), meter.total().per(n)
    return {
        "transactions": transactions["requests"],
        "cancelled": transactions["cancelled"],
        "items": usage["items_written"],
        "wcu": usage["write_units"],
        "wcu+cancelled": usage["write_units"] + usage["cancelled_write_units"],
        "rcu": usage["read_units"],
    }


def run(n: int, urls: int, duplicates: float, batch_size: int) -> list[tuple[str, dict[str, float], bool]]:
    from moto import mock_aws

    from chalicelib.core.aws import AwsClients
    from chalicelib.core.settings import Settings
    from tools import resources

    deliveries, expected = workload(n, urls, duplicates)
    batches = [deliveries[i : i + batch_size] for i in range(0, len(deliveries), batch_size)]
    with mock_aws():
        settings = Settings.from_env({})
        clients = AwsClients(settings)
        seed_only = resources.Resources(tables=(resources.Table(SEED_TABLE, stream=False),), queues=(), buckets=())
        for wanted in (resources.for_settings(settings), seed_only):
            resources.ensure(clients.dynamodb, clients.sqs, clients.s3, wanted, settings.aws_region)
        plain = clients.dynamodb
        probe = MotoProbe(plain, region=settings.aws_region)
        seed, tally = Meter(probe), Meter(probe)
        seed_counts = seed_design(seed.attach(AwsClients(settings).dynamodb), plain, batches)
        tally_counts = tally_design(tally.attach(AwsClients(settings).dynamodb), plain, clients.sqs, settings, batches)
    return [
        ("seed: transaction per view", per_thousand(seed, n), seed_counts == expected),
        ("tally: batched, K per URL", per_thousand(tally, n), tally_counts == expected),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--views", type=int, default=10_000)
    parser.add_argument("--urls", type=int, default=50)
    parser.add_argument("--duplicates", type=float, default=0.1)
    parser.add_argument("--batches", default="100,1000", help="queue batch sizes to compare, comma-separated")
    args = parser.parse_args(argv)

    print(f"{args.views} deliveries over {args.urls} URLs, {args.duplicates:.0%} of them redelivered; per 1,000 views")
    print("(write units assume a cancelled transaction costs what it would have written: wcu+cancelled)\n")
    header = (
        f"{'batch':>6}  {'design':<28}{'txns':>8}{'cancel':>8}{'items':>8}{'wcu':>9}{'wcu+canc':>10}{'rcu':>8}  exact"
    )
    print(header)
    print("-" * len(header))
    for batch_size in (int(b) for b in args.batches.split(",")):
        started = time.monotonic()
        rows = run(args.views, args.urls, args.duplicates, batch_size)
        for name, u, exact in rows:
            print(
                f"{batch_size:>6}  {name:<28}{u['transactions']:>8.1f}{u['cancelled']:>8.1f}{u['items']:>8.1f}"
                f"{u['wcu']:>9.1f}{u['wcu+cancelled']:>10.1f}{u['rcu']:>8.1f}  {'yes' if exact else 'NO'}"
            )
        (_, seed, _), (_, tally, _) = rows
        print(
            f"{batch_size:>6}  ratio seed/tally: {seed['wcu'] / tally['wcu']:.2f}x fewer write units "
            f"({seed['wcu+cancelled'] / tally['wcu+cancelled']:.2f}x counting cancelled), "
            f"{seed['transactions'] / tally['transactions']:.0f}x fewer transactions  "
            f"[{time.monotonic() - started:.0f} s]\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
