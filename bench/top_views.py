"""Top URLs: GET /views/top against ranking by reading every URL's count.

    python -m bench.top_views [--urls 50,1000,10000] [--views-per-url 3] [--limit 10]

The workload: views over the URLs, Zipf-like (the i-th URL about 1/i of the views), spread
over the last 24 hours, counted by the views queue handler in batches of 1,000 (which also
keeps the top URLs' summaries). Then the 10 most viewed URLs of the last 24 hours and of the
last 7 days are asked for, two ways, each metered on the same data:

- tally: GET /views/top (the window's summaries, then exact counts for the candidates it
  examines);
- workaround: what a client does without it: page through GET /views/urls (the catalog and
  the counters) and read every URL's count over the window (GET /views, its bucket items),
  then sort.

Both lists must equal the brute-force ranking (`exact` says whether Tally's answer claims it).
Printed per query: requests, items read, read units (Tally reads its summaries strongly
consistent, the workaround eventually consistent), and the summaries' cost on the write side per 1,000 views (every write of a `VTOP#` item)
with the largest summary item.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from typing import Any

from bench import env

env.prepare()

from bench.metering import Meter, MotoProbe, item_size  # noqa: E402
from chalicelib.core import keyspace, times  # noqa: E402
from chalicelib.core.queues import Message  # noqa: E402
from chalicelib.views import api as views_api  # noqa: E402
from chalicelib.views import batches as views_batches  # noqa: E402
from chalicelib.views import catalog as view_catalog  # noqa: E402
from chalicelib.views import messages as view_messages  # noqa: E402
from chalicelib.views.validation import View  # noqa: E402

NOW = 1_795_000_000_000
HOUR_MS = times.HOUR_MS
BATCH = 1000


def workload(urls: int, per_url: int, seed: int = 1) -> list[View]:
    rng = random.Random(seed)
    weights = [1 / (i + 1) for i in range(urls)]
    chosen = list(range(urls)) + rng.choices(range(urls), weights, k=urls * (per_url - 1))
    return [View(f"https://blog.example/{i}", NOW - rng.randrange(23 * HOUR_MS), f"c{n}") for n, i in enumerate(chosen)]


def workaround(dynamodb: Any, settings: Any, hours: tuple[int, int], limit: int) -> list[tuple[str, int]]:
    """Every URL listed (GET /views/urls, pages of 1,000), each counted over the window."""
    urls: list[str] = []
    cursor: str | None = None
    while True:
        params = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
        page = view_catalog.listing(dynamodb, settings, params, NOW)
        urls += [entry["url"] for entry in page["urls"]]
        cursor = page["next"]
        if not cursor:
            break
    first, last = hours[0] * 60, hours[1] * 60 + 59
    counts = views_api.count_urls(dynamodb, settings, urls, first, last, NOW)[0]
    return sorted(((u, v) for u, v in counts.items() if v), key=lambda uv: (-uv[1], uv[0]))[:limit]


def run(urls: int, per_url: int, limit: int) -> list[tuple[str, str, dict[str, float], bool, str]]:
    from moto import mock_aws

    from chalicelib.core.aws import AwsClients
    from chalicelib.core.settings import Settings
    from tools import resources

    views = workload(urls, per_url)
    truth = Counter(v.url for v in views)
    rows = []
    with mock_aws():
        settings = Settings.from_env({})
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        probe = MotoProbe(clients.dynamodb, region=settings.aws_region)
        writes = Meter(probe)
        handler = writes.attach(AwsClients(settings).dynamodb)
        for start in range(0, len(views), BATCH):
            messages = [
                Message(f"{start}-{i}", f"r-{start}-{i}", view_messages.to_message(v))
                for i, v in enumerate(views[start : start + BATCH])
            ]
            views_batches.apply_messages(handler, clients.sqs, settings, messages, NOW)
        summaries = writes.writes_by_kind[keyspace.VIEW_TOP]
        scan: dict[str, Any] = {
            "TableName": settings.counts_table,
            "FilterExpression": "begins_with(pk, :p)",
            "ExpressionAttributeValues": {":p": {"S": keyspace.VIEW_TOP}},
        }
        largest = 0
        while True:  # every page: a filtered Scan page may hold none of them
            page = clients.dynamodb.scan(**scan)
            largest = max([largest, *(item_size(i) for i in page["Items"])])
            if "LastEvaluatedKey" not in page:
                break
            scan["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        write_note = f"summaries: {summaries * 1000 / len(views):.1f} WCU per 1,000 views, largest {largest:,} B"
        last_hour = NOW // HOUR_MS
        for window, hours in (("24h", (last_hour - 23, last_hour)), ("7d", (last_hour - 167, last_hour))):
            expected = sorted(truth.items(), key=lambda uv: (-uv[1], uv[0]))[:limit]  # every view is in both
            tally = Meter(probe)
            answer = views_api.top_urls(tally.attach(AwsClients(settings).dynamodb), settings, hours, limit, None, NOW)
            listed = [(r["url"], r["views"]) for r in answer["urls"]]
            ok = [v for _, v in listed] == [v for _, v in expected] and all(truth[u] == v for u, v in listed)
            rows.append((window, "tally", _usage(tally), ok, f"exact={answer['exact']} bound={answer['bound']}"))
            other = Meter(probe)
            ranked = workaround(other.attach(AwsClients(settings).dynamodb), settings, hours, limit)
            rows.append((window, "workaround", _usage(other), [v for _, v in ranked] == [v for _, v in expected], ""))
        rows.append(("", "", {}, True, write_note))
    return rows


def _usage(meter: Meter) -> dict[str, float]:
    total = meter.total()
    return {"requests": total.requests, "items": total.items_read, "rcu": total.read_units}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--urls", default="50,1000,10000", help="numbers of URLs to sweep, comma-separated")
    parser.add_argument("--views-per-url", type=int, default=3)
    parser.add_argument("--limit", type=int, default=10)
    args = parser.parse_args(argv)
    header = f"{'urls':>6} {'window':>6}  {'design':<11}{'requests':>9}{'items':>9}{'rcu':>9}  {'right':<6}note"
    print(f"top {args.limit} URLs, {args.views_per_url} views per URL on average, per query\n")
    print(header)
    print("-" * len(header))
    for urls in (int(u) for u in args.urls.split(",")):
        started = time.monotonic()
        rows = run(urls, args.views_per_url, args.limit)
        by: dict[tuple[str, str], dict[str, float]] = {}
        for window, design, usage, right, note in rows:
            if not design:
                print(f"{urls:>6}  {note}")
                continue
            by[(window, design)] = usage
            print(
                f"{urls:>6} {window:>6}  {design:<11}{usage['requests']:>9.0f}{usage['items']:>9.0f}"
                f"{usage['rcu']:>9.1f}  {'yes' if right else 'NO':<6}{note}"
            )
        for window in ("24h", "7d"):
            tally, other = by[(window, "tally")], by[(window, "workaround")]
            print(f"{urls:>6} {window:>6}  tally/workaround: {tally['rcu'] / other['rcu']:.3f}x the read units")
        print(f"       [{time.monotonic() - started:.0f} s]\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
