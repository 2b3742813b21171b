"""Exact view counters: Tally's one counter update per URL and batch vs the seed's one
transaction per view,
and ranged counts from buckets vs counting markers.

    python -m bench.views [--views 2000] [--urls 50,1000,10000] [--duplicates 0.1]
                          [--batches 10,100,1000] [--ranged 1000,10000,100000]
                          [--measure-markers-up-to 10000] [--before-buckets]

Writes. The same workload, on moto, through each design: views spread over URLs, a share of
the messages delivered again later (SQS's at-least-once), cut into queue batches; every
number of URLs with every batch size. The seed writes a marker and an increment of 1 in one
transaction per view; Tally reads the batch's counters, then writes one conditional update per
URL (up to 50 views) adding K to its counter and its pending minutes and the views' marker
tokens to the counter, spilling the tokens to items of their own once the counter would pass a
kilobyte (chalicelib.views.markers), and moves pending minutes into hour, day and 32-day block
items in bulk (chalicelib.views.rollup). Use --views large enough for several hundred views
per URL to see spills (say --views 20000 --urls 50). Tally's rows include the URL listing:
each batch's log item naming its new URLs, and the scheduled fold of them into the catalog's
pages, run once at the end (its share is printed in the row's name); every URL must be listed. With --before-buckets, also the same
handler without any bucket. Every design must end with exact all-time counts, and Tally with
exact ranged counts (a sample of URLs, over the whole workload and over a partial range, each
checked against counting the distinct views).

Ranged reads. One URL with N views spread over the last 7 days; `GET /views` over those 7
days as Tally answered it before buckets (a paginated Query counting the markers in the
range) and as it answers now (its bucket items, one BatchGetItem). Both must give the same
count.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from bench import env

env.prepare()

from botocore.exceptions import ClientError  # noqa: E402

from bench.metering import KB, Meter, MotoProbe, item_size, read_units  # noqa: E402
from chalicelib.core import catalog, dynamo  # noqa: E402
from chalicelib.core.pager import PageRequest, decode_cursor  # noqa: E402
from chalicelib.core.queues import Message  # noqa: E402
from chalicelib.core.timebuckets import Bucket  # noqa: E402
from chalicelib.core.times import iso  # noqa: E402
from chalicelib.views import api as views_api  # noqa: E402
from chalicelib.views import batches as views_batches  # noqa: E402
from chalicelib.views import catalog as view_catalog  # noqa: E402
from chalicelib.views import layout as view_keys  # noqa: E402
from chalicelib.views import messages as view_messages  # noqa: E402
from chalicelib.views import rollup, windows  # noqa: E402
from chalicelib.views.validation import View  # noqa: E402

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
        # After the first delivery: a resend comes after its view, never before every view.
        position = max(1, rng.randrange(len(deliveries) + 1))
        deliveries.insert(position, rng.choice(deliveries[:position]))
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
        messages = [
            Message(f"{number}-{i}", f"r-{number}-{i}", view_messages.to_message(v)) for i, v in enumerate(batch)
        ]
        views_batches.apply_messages(dynamodb, sqs, settings, messages, T0)
    urls = {v.url for batch in batches for v in batch}
    return {url: views_api.count(plain, settings, url, None, T0)["views"] for url in urls}


RANGE_SAMPLE = 100


def ranges_exact(plain: Any, settings: Any, batches: list[list[View]]) -> bool:
    """Ranged counts of a sample of URLs equal the distinct views in the range: the whole
    workload (whole day and block items) and its middle third (hours and minutes)."""
    views = {v for batch in batches for v in batch}
    times = sorted(v.time_ms for v in views)
    low, high = times[0], times[-1]
    third = (high - low) // 3
    ranges = [(low - low % DAY_MS, high), (low + third, high - third)]
    urls = sorted({v.url for v in views})[:RANGE_SAMPLE]
    for url in urls:
        for start, end in ranges:
            first, last = start // 60_000, end // 60_000
            expected = sum(1 for v in views if v.url == url and first <= v.time_ms // 60_000 <= last)
            answer = views_api.count(plain, settings, url, (first, last), T0 + DAY_MS)
            if answer["views"] != expected:
                return False
    return True


def without_buckets(settings: Any, time_ms: int, now_ms: int) -> tuple[Bucket, ...]:
    """The handler as it was before ranged counts came from buckets: no view has a live bucket."""
    return ()


def listed_urls(dynamodb: Any, settings: Any) -> int:
    """How many URLs `GET /views/urls` lists, every page followed (each at most once)."""
    names: list[str] = []
    after = None
    while True:
        entries, cursor = catalog.page(dynamodb, settings, view_catalog.KIND, PageRequest(after, 1000), T0)
        names += [e.name for e in entries]
        if cursor is None:
            return len(names) if len(names) == len(set(names)) else -1
        after = decode_cursor(cursor, str)


def per_thousand(meter: Meter, n: int) -> dict[str, float]:
    transactions, usage = meter.total("TransactWriteItems").per(n), meter.total().per(n)
    return {
        "transactions": transactions["requests"],
        "cancelled": transactions["cancelled"],
        "items": usage["items_written"],
        "wcu": usage["write_units"],
        "wcu+cancelled": usage["write_units"] + usage["cancelled_write_units"],
        "rcu": usage["read_units"],
        **{f"wcu {kind}": units * 1000 / n for kind, units in sorted(meter.writes_by_kind.items())},
        **{f"rcu {op}": u.read_units * 1000 / n for op, u in sorted(meter.by_operation.items()) if u.read_units},
    }


def run(
    n: int, urls: int, duplicates: float, batch_size: int, before_buckets: bool
) -> list[tuple[str, dict[str, float], bool]]:
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
        tally_client = tally.attach(AwsClients(settings).dynamodb)
        tally_counts = tally_design(tally_client, plain, clients.sqs, settings, batches)
        # GET /views/urls: the scheduled fold of the URLs the batches logged, once for the run
        # (it runs every CATALOG_FOLD_MINUTES; a run's URLs are what one fold merges at most).
        folding = Meter(probe)
        catalog.fold(folding.attach(AwsClients(settings).dynamodb), settings, view_catalog.KIND, T0)
        tally_exact = tally_counts == expected and ranges_exact(plain, settings, batches)
        tally_exact = tally_exact and listed_urls(plain, settings) == len({v.url for v in deliveries})
    fold, counted = per_thousand(folding, n), per_thousand(tally, n)
    rows = [
        ("seed: transaction per view", per_thousand(seed, n), seed_counts == expected),
        (
            f"tally (fold {fold['wcu']:.0f} wcu)",
            {k: counted.get(k, 0) + fold.get(k, 0) for k in sorted({*counted, *fold})},
            tally_exact,
        ),
    ]
    if not before_buckets:
        return rows
    with mock_aws():  # the same handler without bucket increments, on a table of its own
        settings = Settings.from_env({})
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        before = Meter(MotoProbe(clients.dynamodb, region=settings.aws_region))
        live_spans, views_batches._live_spans = views_batches._live_spans, without_buckets
        try:
            before_counts = tally_design(
                before.attach(AwsClients(settings).dynamodb), clients.dynamodb, clients.sqs, settings, batches
            )
        finally:
            views_batches._live_spans = live_spans
    return rows + [("tally: no buckets", per_thousand(before, n), before_counts == expected)]


# -- ranged reads -------------------------------------------------------------------------------

DAY_MS = 86_400_000
PAGE_BYTES = 1024 * KB  # a Query page reads at most 1 MB


def marker_range(start_ms: int, end_ms: int, policy: str) -> tuple[str, str]:
    """Sort keys bounding the marker items of views in [start, end) when each marker was an item
    keyed by its name (chalicelib.views.layout.marker_sk), both inclusive (for BETWEEN: DynamoDB
    allows no key attribute in a filter). "~" sorts after every hex digit."""
    prefix = view_keys.POLICY_PREFIX[policy]
    return f"{prefix}{iso(start_ms)}", f"{prefix}{iso(end_ms - 1)}#~"


def marker_count(dynamodb: Any, settings: Any, url: str, start_ms: int, end_ms: int, now_ms: int) -> int:
    """GET /views?start&end before buckets: count the URL's markers in [start, end), every page."""
    low, high = marker_range(start_ms, end_ms, settings.view_dedup)
    request: dict[str, Any] = {
        "TableName": settings.counts_table,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
        "FilterExpression": "expires_at > :now",
        "ExpressionAttributeValues": {
            ":pk": {"S": view_keys.url_pk(url)},
            ":low": {"S": low},
            ":high": {"S": high},
            ":now": {"N": str(now_ms // 1000)},
        },
        "Select": "COUNT",
    }
    return sum(int(page["Count"]) for page in dynamo.query_pages(dynamodb, request, "could not count the markers"))


def store_views(dynamodb: Any, settings: Any, url: str, times: list[int], now_ms: int, markers: bool) -> None:
    """What the queue handler leaves for these views (bucket items, and markers if asked), written
    directly: counting 100,000 views through moto's transactions would take the whole run."""
    if markers:
        expires = str(now_ms // 1000 + settings.view_horizon_seconds)
        puts = [{"PutRequest": {"Item": marker_item(url, t, i, expires)}} for i, t in enumerate(times)]
        for start in range(0, len(puts), 25):
            dynamodb.batch_write_item(RequestItems={settings.counts_table: puts[start : start + 25]})
    pk = view_keys.bucket_pk(view_keys.url_pk(url))
    for span, increment in windows.increments(times).items():
        dynamodb.update_item(**rollup.bucket_update(settings, pk, span, increment)["Update"])


def marker_item(url: str, time_ms: int, number: int, expires: str) -> dict[str, Any]:
    view = View(url, time_ms, f"client-{number:07d}")
    key = {"pk": {"S": view_keys.url_pk(url)}, "sk": {"S": view_keys.marker_sk(view, "event")}}
    return {**key, "expires_at": {"N": expires}}


def marker_query_by_the_rules(n: int, item_bytes: int) -> dict[str, Any]:
    """What the marker Query costs by DynamoDB's rules (1 MB a page, each page charged on the
    size it evaluated), without running it: moto's Query re-reads the whole partition for
    every page, which takes it minutes at 100,000 markers."""
    per_page = PAGE_BYTES // item_bytes
    pages, rest = divmod(n, per_page)
    rcu = pages * read_units(per_page * item_bytes, False) + (read_units(rest * item_bytes, False) if rest else 0)
    return {"requests": pages + (1 if rest else 0), "items": n, "rcu": rcu, "seconds": None, "exact": None}


def ranged(n: int, measure_markers: bool) -> dict[str, dict[str, Any]]:
    from moto import mock_aws

    from chalicelib.core.aws import AwsClients
    from chalicelib.core.settings import Settings
    from tools import resources

    url, now = "https://blog.example/popular", T0
    rng = random.Random(n)
    times = [now - rng.randrange(7 * DAY_MS) for _ in range(n)]
    last_minute = now // 60_000
    first_minute = last_minute - 7 * 1440 + 1
    start_ms, end_ms = first_minute * 60_000, (last_minute + 1) * 60_000
    expected = sum(1 for t in times if start_ms <= t < end_ms)
    with mock_aws():
        settings = Settings.from_env({})
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        store_views(clients.dynamodb, settings, url, times, now, measure_markers)
        probe = MotoProbe(clients.dynamodb, region=settings.aws_region)
        reads = {"buckets": lambda c: views_api.count_range(c, settings, url, first_minute, last_minute, now)["views"]}
        rows: dict[str, dict[str, Any]] = {}
        if measure_markers:
            reads = {"markers": lambda c: marker_count(c, settings, url, start_ms, end_ms, now), **reads}
        else:
            rows["markers"] = marker_query_by_the_rules(n, item_size(marker_item(url, now, 0, "1795000000")))
        for name, read in reads.items():
            meter = Meter(probe)
            client = meter.attach(AwsClients(settings).dynamodb)
            started = time.perf_counter()
            count = read(client)
            seconds = time.perf_counter() - started
            usage = meter.total()
            rows[name] = {
                "requests": usage.requests,
                "items": usage.items_read,
                "rcu": usage.read_units,
                "seconds": seconds,
                "exact": count == expected,
            }
    return {"markers": rows["markers"], "buckets": rows["buckets"]}


def print_ranged(sizes: list[int], measure_up_to: int) -> None:
    print("GET /views over 7 days for one URL: before (Query counting markers) vs now (bucket items)")
    print(f"(markers beyond {measure_up_to:,} views: their Query's cost by DynamoDB's rules, not run on moto)\n")
    header = f"{'views':>8}  {'design':<9}{'requests':>9}{'items read':>12}{'rcu':>10}{'ms (moto)':>11}  exact"
    print(header)
    print("-" * len(header))
    for n in sizes:
        rows = ranged(n, n <= measure_up_to)
        for name, r in rows.items():
            ms = "-" if r["seconds"] is None else f"{r['seconds'] * 1000:.1f}"
            exact = "by rule" if r["exact"] is None else "yes" if r["exact"] else "NO"
            print(f"{n:>8}  {name:<9}{r['requests']:>9}{r['items']:>12}{r['rcu']:>10.1f}{ms:>11}  {exact}")
        old, new = rows["markers"], rows["buckets"]
        timing = "" if old["seconds"] is None else f", {old['seconds'] / new['seconds']:.0f}x time on moto"
        print(
            f"{n:>8}  ratio markers/buckets: {old['rcu'] / new['rcu']:.0f}x read units, "
            f"{old['items'] / max(new['items'], 1):.0f}x items, {old['requests'] / new['requests']:.0f}x requests"
            f"{timing}\n"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--views", type=int, default=2_000)
    parser.add_argument("--urls", default="50,1000,10000", help="numbers of URLs to sweep, comma-separated")
    parser.add_argument("--duplicates", type=float, default=0.1)
    parser.add_argument("--batches", default="10,100,1000", help="queue batch sizes to sweep, comma-separated")
    parser.add_argument("--ranged", default="1000,10000,100000", help="views of the URL read over 7 days")
    parser.add_argument("--measure-markers-up-to", type=int, default=10_000, help="run the marker Query up to here")
    parser.add_argument("--before-buckets", action="store_true", help="also run the handler without buckets")
    parser.add_argument(
        "--breakdown", action="store_true", help="also print Tally's write units by item kind and read units by call"
    )
    args = parser.parse_args(argv)
    if args.ranged:
        print_ranged([int(n) for n in args.ranged.split(",")], args.measure_markers_up_to)

    print(f"{args.views} deliveries, {args.duplicates:.0%} of them redelivered; per 1,000 deliveries")
    print("(write units assume a cancelled transaction costs what it would have written: wcu+cancelled)\n")
    header = (
        f"{'urls':>6}{'batch':>7}  {'design':<28}{'txns':>8}{'cancel':>8}{'items':>8}{'wcu':>9}{'wcu+canc':>10}"
        f"{'rcu':>8}  exact"
    )
    print(header)
    print("-" * len(header))
    for urls in (int(u) for u in args.urls.split(",")):
        for batch_size in (int(b) for b in args.batches.split(",")):
            started = time.monotonic()
            rows = run(args.views, urls, args.duplicates, batch_size, args.before_buckets)
            for name, u, exact in rows:
                print(
                    f"{urls:>6}{batch_size:>7}  {name:<28}{u['transactions']:>8.1f}{u['cancelled']:>8.1f}"
                    f"{u['items']:>8.1f}{u['wcu']:>9.1f}{u['wcu+cancelled']:>10.1f}{u['rcu']:>8.1f}  "
                    f"{'yes' if exact else 'NO'}"
                )
            (_, seed, _), (_, tally, _) = rows[:2]
            if args.breakdown:
                kinds = {k.removeprefix("wcu "): v for k, v in tally.items() if k.startswith("wcu ")}
                print(
                    f"{urls:>6}{batch_size:>7}  tally's write units by item kind: "
                    + ", ".join(f"{kind} {units:,.0f}" for kind, units in kinds.items())
                )
                reads = {k.removeprefix("rcu "): v for k, v in tally.items() if k.startswith("rcu ")}
                print(
                    f"{urls:>6}{batch_size:>7}  tally's read units by call: "
                    + ", ".join(f"{op} {units:,.0f}" for op, units in reads.items())
                )
            print(
                f"{urls:>6}{batch_size:>7}  tally/seed: {tally['wcu'] / seed['wcu']:.2f}x the write units "
                f"({tally['wcu+cancelled'] / seed['wcu+cancelled']:.2f}x counting cancelled)  "
                f"[{time.monotonic() - started:.0f} s]\n",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
