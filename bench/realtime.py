"""A site's realtime visitors: what the minute sketches cost as the page-view rate grows, against
the previous design (one PutItem per page view), in the same run.

    python -m bench.realtime [--rates 0.1 1 10 100 1000] [--windows 60] [--minutes 5]

At each rate (page views a second, visitors drawn from a pool of a third as many page views
over the run, so most visitors come back), the page views' visitor messages are gathered as the
unique-count queue gathers them (one batch per batching window, 60 s by default, at most
UNIQUES_BATCH_SIZE messages) and each batch merges the sketch of every minute it holds (uniques.batches.merge_into,
metered on moto by bench.metering). Then `GET /sites/{site}/realtime`'s visitor read (five
minute sketches, one consistent BatchGetItem) is metered at the end of the run.

The previous design, priced from its layout: one PutItem of an item under 1 KB per page view
(one write unit), and a consistent Query of every (visitor, minute) item of the last five
minutes, about 60 bytes each, at most 10,000 of them.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
from dataclasses import replace

from bench import env

env.prepare()


from bench import uniques as uniques_bench  # noqa: E402
from bench.cost import stack  # noqa: E402
from bench.metering import Meter  # noqa: E402
from chalicelib.core import times  # noqa: E402
from chalicelib.core.aws import AwsClients  # noqa: E402
from chalicelib.sites import api as site_api  # noqa: E402
from chalicelib.sites import names  # noqa: E402
from chalicelib.uniques import api as uniques_api  # noqa: E402

T0 = 1_795_000_000_000 - 1_795_000_000_000 % times.MINUTE_MS
SITE = "blog.example"
PREVIOUS_ITEM_BYTES, PREVIOUS_MOST_ITEMS = 60, 10_000


def run(rate: float, minutes: int, window_s: int) -> dict[str, float]:
    rng = random.Random(1)
    views = max(1, round(rate * minutes * 60))
    pool = max(1, views // 3)
    seen = [(T0 + round(i * 1000 / rate), f"visitor-{rng.randrange(pool)}") for i in range(views)]
    name = names.visitors_name(SITE)
    with stack() as (stage, _clients, probe):
        settings = replace(stage, uniques_batching_window_seconds=window_s)
        writing, reading = Meter(probe), Meter(probe)
        writer = writing.attach(AwsClients(settings).dynamodb)
        merges = uniques_bench.merge_minutes(writer, settings, name, [(t, t, visitor) for t, visitor in seen])
        now_ms = seen[-1][0]
        last = now_ms // times.MINUTE_MS
        first = last - site_api.VISITOR_MINUTES + 1
        answer = uniques_api.recent(reading.attach(AwsClients(settings).dynamodb), settings, name, first, last)
    truth = {v for t, v in seen if t // times.MINUTE_MS >= first}
    pairs = {(t // times.MINUTE_MS, v) for t, v in seen if t // times.MINUTE_MS >= first}
    previous_read = math.ceil(min(len(pairs), PREVIOUS_MOST_ITEMS) * PREVIOUS_ITEM_BYTES / 4096)
    written = writing.total()
    per_million = 1_000_000 / views
    return {
        "rate": rate,
        "views": views,
        "merges": merges,
        "write_units_per_million": written.write_units * per_million,
        "read_units_per_million": written.read_units * per_million,
        "previous_write_units_per_million": 1_000_000,
        "read_units_per_realtime_read": reading.total().read_units,
        "previous_read_units_per_realtime_read": max(previous_read, 1),
        "visitors": answer["cardinality"],
        "true_visitors": len(truth),
        "exact": answer["exact"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", type=float, nargs="*", default=[0.1, 1, 10, 100, 1000])
    parser.add_argument("--windows", type=int, nargs="*", default=[60], help="batching windows, seconds")
    parser.add_argument("--minutes", type=int, default=5)
    args = parser.parse_args(argv)
    print(
        "| page views/s | batching window, s | page views | sketch merges | write units / M views | previous | ratio "
        "| read units / M views (merges) | read units / realtime read | previous | visitors (true) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for rate, window_s in itertools.product(args.rates, args.windows):
        r = run(rate, args.minutes, window_s)
        ratio = r["write_units_per_million"] / r["previous_write_units_per_million"]
        print(
            f"| {rate:g} | {window_s} | {r['views']:,} | {r['merges']:,} | {r['write_units_per_million']:,.0f} | "
            f"{r['previous_write_units_per_million']:,} | {ratio:.4f}x | {r['read_units_per_million']:,.0f} | "
            f"{r['read_units_per_realtime_read']:g} | {r['previous_read_units_per_realtime_read']:g} | "
            f"{r['visitors']:,} ({r['true_visitors']:,}{', exact' if r['exact'] else ''}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
