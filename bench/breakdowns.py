"""Breakdowns by dimension against today's workaround, in one run on moto.

    python -m bench.breakdowns [--events 5000] [--values 10,100,1000,10000,100000] [--batch 100]
                               [--dimensions 1,4] [--filter-pairs *|none|name+name,...]

The workaround users have today: one client-named counter per value (`jobs.<provider>`), and a
ranking made by listing the counters (`GET /counters`) and reading every one's count over the
window. Tally: one counter `jobs` whose events carry `"dimensions": {"provider": ...}` (and, in
the 4-dimension rows, three more dimensions of a few values each), ranked by
`GET /counters/jobs/breakdown?by=provider`.

Per row the same events (times spread over the last 24 hours, in ingest order, values drawn
from a Zipf distribution over the value space, `"values": {"amount": ...}` on every one) go
through the stream handler in batches, every batch is then delivered a second time, and:

- write units per 1,000 events (bench.metering: item sizes, AWS's pricing rules), the largest
  counts-table item, and whether every count, sum and filter is exact after the redelivery;
- one 24-hour breakdown (top 10): requests, items read (keys), read units, and the ranking's
  accuracy against brute force: the share of the true top 10 listed with their exact counts,
  and whether the answer said `exact`.
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from collections import Counter
from decimal import Decimal
from typing import Any

from bench import env

env.prepare()

import boto3  # noqa: E402
from boto3.dynamodb.types import TypeSerializer  # noqa: E402
from moto import mock_aws  # noqa: E402

from bench.counters import scan_all, stream_batches  # noqa: E402
from bench.metering import Meter, MotoProbe, item_size  # noqa: E402
from chalicelib.core import decimals  # noqa: E402
from chalicelib.core.settings import Settings  # noqa: E402
from chalicelib.counters import breakdowns, catalog, filters, reads, stream  # noqa: E402  # noqa: E402
from chalicelib.events import ingest as events  # noqa: E402
from chalicelib.events import stream_records  # noqa: E402
from tools import resources  # noqa: E402

SHARD = "shardId-00000001795000000000-bench0001"
START = 1_795_000_000_000
DAY_MS = 86_400_000
TOP = 10
_SERIALIZER = TypeSerializer()


def zipf_values(count: int, space: int, rng: random.Random) -> list[str]:
    weights = list(itertools.accumulate(1 / (k**1.1) for k in range(1, space + 1)))
    return [f"p{k}" for k in rng.choices(range(space), cum_weights=weights, k=count)]


def make_events(count: int, space: int, dimensions: int, seed: int = 7) -> list[events.Event]:
    """Tally's events: counter `jobs`, `provider` from the value space and dimensions-1 more of 3 values each."""
    rng = random.Random(seed)
    providers = zipf_values(count, space, rng)
    made = []
    for i, provider in enumerate(providers):
        t = START + i * (DAY_MS - 60_000) // count
        amount = {"amount": Decimal(rng.randrange(1, 100_000)) / 100}
        dims = {"provider": provider}
        for d in range(1, dimensions):
            dims[f"d{d}"] = f"v{rng.randrange(3)}"
        made.append(events.Event("jobs", f"e{i}", t, 7 * 86400, id_given=False, dimensions=dims, values=amount))
    return made


def workaround_events(made: list[events.Event], every: bool, pairs: tuple[str, ...]) -> list[events.Event]:
    """The same events as client-named counters: one per provider value (`jobs.p3`), or, to answer
    what Tally answers, one per value of each dimension and of each pair FILTER_PAIRS counts
    (`jobs.provider:p3`, `jobs.d1:v0.provider:p3`)."""
    out = []
    for e in made:
        if not every:
            names = [f"jobs.{e.dimensions['provider']}"]
        else:
            names = [
                "jobs." + ".".join(f"{k}:{v}" for k, v in sorted(subset.items()))
                for subset in filters.subsets(e.dimensions, pairs)
            ]
        out += [events.Event(n, e.id, e.time_ms, e.retention_seconds, id_given=False, values=e.values) for n in names]
    return out


def provider_of(counter: str, every: bool) -> str | None:
    """The provider value a workaround counter counts alone, None for another one."""
    rest = counter.split(".", 1)[1]
    if not every:
        return rest
    return rest.split(":", 1)[1] if rest.startswith("provider:") and "." not in rest else None


def provider_counter(value: str, every: bool) -> str:
    return f"jobs.provider:{value}" if every else f"jobs.{value}"


def items_of(made: list[events.Event], settings: Settings) -> list[dict[str, Any]]:
    return [{k: _SERIALIZER.serialize(v) for k, v in events.to_item(e, e.time_ms, settings).items()} for e in made]


def deliver(client: Any, settings: Settings, batch: list[dict[str, Any]], now: int) -> None:
    stream.apply_stream_batch(
        client, settings, stream_records.from_lambda_event({"Records": batch, "shardId": SHARD, "state": {}}), now
    )


def stack(settings: Settings) -> tuple[Any, Any, Any]:
    session = boto3.session.Session(region_name="us-east-1")
    plain = session.client("dynamodb")
    resources.ensure(plain, session.client("sqs"), session.client("s3"), resources.for_settings(settings), "us-east-1")
    return session, plain, MotoProbe(plain)


def run(
    space: int, count: int, batch: int, dimensions: int, workaround: bool, pairs: str = "*", every: bool = False
) -> dict[str, Any]:
    settings = Settings.from_env({"FILTER_PAIRS": pairs})
    base = make_events(count, space, dimensions)
    made = workaround_events(base, every, settings.filter_pairs) if workaround else base
    now = START + DAY_MS
    last = now // 60_000 - 1
    first = last - 1439
    with mock_aws():
        session, plain, probe = stack(settings)
        writer = session.client("dynamodb")
        meter = Meter(probe)
        meter.attach(writer)
        items = items_of(made, settings)
        began = time.perf_counter()
        for records in stream_batches(items, batch):
            deliver(writer, settings, records, now)
        seconds = time.perf_counter() - began
        written = meter.total()
        where = {kind: units * 1000 / count for kind, units in meter.writes_by_kind.items() if units}
        for records in stream_batches(items, batch):  # at least once: every batch again
            deliver(plain, settings, records, now)
        largest = max(item_size(i) for i in scan_all(plain, settings.counts_table))
        truth = Counter(e.dimensions["provider"] for e in base)
        sums: dict[str, Decimal] = {}
        for e in base:
            key = e.dimensions["provider"]
            sums[key] = decimals.EXACT.add(sums.get(key, Decimal(0)), e.values["amount"])
        reader = session.client("dynamodb")
        read_meter = Meter(probe)
        read_meter.attach(reader)
        if workaround:
            ranking, exact_flag = rank_workaround(reader, settings, first, last, now, every)
        else:
            answer = breakdowns.breakdown(reader, settings, "jobs", "provider", first, last, TOP, {}, now)
            ranking = [(v["value"], v["count"], Decimal(str(v["sums"].get("amount", 0)))) for v in answer["values"]]
            exact_flag = answer["exact"]
            assert sum(v["count"] for v in answer["values"]) + answer["others"]["count"] == count
        read = read_meter.total()
        true_top = sorted(truth.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
        hits = sum(1 for (v, n), (lv, ln, _) in zip(true_top, ranking) if (v, n) == (lv, ln))
        exact_sums = all(s == sums[v] for v, _, s in ranking)
        checked = exact_counts(plain, settings, base, truth, sums, first, last, now, workaround, every)
    return {
        "distinct": len(truth),
        "write_units": written.write_units * 1000 / count,
        "writes": written.requests * 1000 / count,
        "largest": largest,
        "exact_after_twice": checked,
        "read_requests": read.requests,
        "items_read": read.items_read,
        "read_units": read.read_units,
        "top_hits": hits / len(true_top),
        "exact_sums": exact_sums,
        "said_exact": exact_flag,
        "seconds": seconds,
        "where": where,
    }


def rank_workaround(
    reader: Any, settings: Settings, first: int, last: int, now: int, every: bool = False
) -> tuple[list[tuple[str, int, Decimal]], bool]:
    """List every counter (GET /counters, page by page), read each one's 24-hour count, sort."""
    names: list[str] = []
    params: dict[str, str] = {"limit": "1000"}
    while True:
        page = catalog.listing(reader, settings, params, now)
        names += [c["name"] for c in page["counters"]]
        if page["next"] is None:
            break
        params = {"limit": "1000", "cursor": page["next"]}
    counted = []
    for name in names:
        value = provider_of(name, every)
        if value is None:
            continue
        window = reads.count_window(reader, settings, name, first, last, now)
        counted.append((value, window.count, window.sums.get("amount", Decimal(0))))
    counted.sort(key=lambda v: (-v[1], v[0]))
    return counted[:TOP], True


def exact_counts(
    dynamodb: Any,
    settings: Settings,
    made: list[events.Event],
    truth: Counter[str],
    sums: dict[str, Decimal],
    first: int,
    last: int,
    now: int,
    workaround: bool,
    every: bool = False,
) -> bool:
    """The whole count and the 5 most frequent values' counts and sums (filters, or their own
    counters) equal brute force after every batch was delivered twice."""
    top = [v for v, _ in truth.most_common(5)]
    if workaround:
        windows = [reads.count_window(dynamodb, settings, provider_counter(v, every), first, last, now) for v in top]
        return all((w.count, w.sums.get("amount")) == (truth[v], sums[v]) for w, v in zip(windows, top))
    whole = reads.count_window(dynamodb, settings, "jobs", first, last, now)
    if whole.count != len(made):
        return False
    for v in top:
        w = reads.count_window(dynamodb, settings, "jobs", first, last, now, where={"provider": v})
        if (w.count, w.sums.get("amount")) != (truth[v], sums[v]):
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--values", default="10,100,1000,10000,100000", help="sizes of the value space to sweep")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--dimensions", default="1,4", help="dimensions per event (Tally rows)")
    parser.add_argument(
        "--filter-pairs", default="*", help="FILTER_PAIRS of the Tally rows: * (every pair), none, or name+name,..."
    )
    parser.add_argument("--explain", action="store_true", help="also print each row's write units by kind of item")
    args = parser.parse_args(argv)
    spaces = [int(v) for v in args.values.split(",") if v]
    dims = [int(d) for d in args.dimensions.split(",") if d]
    print(f"## {args.events:,} events over 24 hours, stream batches of {args.batch}; a 24-hour top {TOP}\n")
    print(
        "| value space | distinct seen | design | write units / 1,000 events | vs workaround | writes / 1,000 "
        "| largest item, bytes | exact after every batch twice | breakdown requests | items read | read units "
        "| vs workaround | top-10 right | sums exact | said exact | seconds | write units vs the same answers by counters |"
    )
    print("|" + "---|" * 17)
    pairs_label = "" if args.filter_pairs == "*" else f" (FILTER_PAIRS {args.filter_pairs})"
    for space in spaces:
        # The workaround of the question asked (a counter per provider value), and for several
        # dimensions the one that answers what Tally answers: a counter per value of every
        # dimension and of every pair counted, so counts of each and the filters.
        rows = [("workaround: a counter per provider value", True, 1, False)]
        rows += [
            (
                f"workaround: a counter per value of each of {d} dimensions and each pair counted{pairs_label}",
                True,
                d,
                True,
            )
            for d in dims
            if d > 1
        ]
        rows += [(f"Tally, {d} dimension{'s' if d > 1 else ''}{pairs_label}", False, d, False) for d in dims]
        base: dict[str, Any] = {}
        same: dict[int, dict[str, Any]] = {}
        for label, workaround, d, every in rows:
            r = run(space, args.events, args.batch, d, workaround, args.filter_pairs, every)
            base = base or r
            if workaround:
                same[d] = r
            like = same.get(d)
            versus = f"{r['write_units'] / like['write_units']:.2f}x" if like is not None and not workaround else ""
            print(
                f"| {space:,} | {r['distinct']:,} | {label} | {r['write_units']:,.0f} "
                f"| {r['write_units'] / base['write_units']:.2f}x | {r['writes']:,.0f} "
                f"| {r['largest']:,} | {'yes' if r['exact_after_twice'] else 'NO'} | {r['read_requests']:,} "
                f"| {r['items_read']:,} | {r['read_units']:,.1f} | {r['read_units'] / base['read_units']:.3f}x "
                f"| {r['top_hits']:.0%} "
                f"| {'yes' if r['exact_sums'] else 'no'} | {'yes' if r['said_exact'] else 'no'} "
                f"| {r['seconds']:.0f} | {versus} |",
                flush=True,
            )
            if args.explain:
                parts = sorted(r["where"].items(), key=lambda kv: -kv[1])
                print("|  | | where: " + ", ".join(f"{kind} {units:,.0f}" for kind, units in parts) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
