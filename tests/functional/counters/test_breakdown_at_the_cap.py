"""A dimension with 100,000 distinct values in one day, on moto: the breakdown summaries' items,
their writes per batch and a breakdown's reads stay within the bounds docs/counting.md states,
whatever the number of values; the values that matter are still listed exactly.

The long tail (100,000 values of one event each) is merged into the summaries exactly as the
stream handler merges it (summary_writes.plan and summary_writes.write, batches of 1,000 from their own
shard); its filter counters, one per value as with one counter per value, are left out to keep
the test short. Three heavy values go through the whole stream handler, so their counts can be
read exactly from their filter counters.
"""

from __future__ import annotations

import random
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from chalicelib.core import keyspace
from chalicelib.core.item_sizes import item_size
from chalicelib.core.settings import Settings
from chalicelib.counters import breakdowns, countable, layout, stream, summary_writes
from chalicelib.events.stream_records import from_lambda_event
from tests.functional.stream_fixtures import lambda_event, record

SETTINGS = Settings()
DAY_MS = 86_400_000
NOW = 1_795_046_400_000 + DAY_MS  # a UTC midnight: the day before is one whole day bucket
DAY_START = NOW - DAY_MS
TAIL = 100_000
HEAVY = {"h1": 3000, "h2": 2000, "h3": 1000}
BATCH = 1000
_serialize = TypeSerializer().serialize


def image(n: int, value: str, t: int) -> dict[str, Any]:
    plain = {
        "pk": f"q#{n % 4}",
        "sk": f"2026-11-18T08:26:40.000Z#{n:08d}",
        "kind": "event",
        "counter": "wide",
        "id": f"gen-{n}",
        "id_given": False,
        "time": t,
        "retention": 7 * 86400,
        "dimensions": {"provider": value},
    }
    return {k: _serialize(v) for k, v in plain.items()}


def test_given_100000_distinct_values_in_a_day_when_counted_and_broken_down_then_items_writes_and_reads_bounded(
    aws: Any,
) -> None:
    heavy = [v for v, n in HEAVY.items() for _ in range(n)]
    random.Random(7).shuffle(heavy)
    tail_images = [image(i, f"v{i:05d}", DAY_START + i * (DAY_MS - 1) // TAIL) for i in range(TAIL)]
    heavy_images = [image(TAIL + i, v, DAY_START + i * (DAY_MS - 1) // len(heavy)) for i, v in enumerate(heavy)]
    calls_per_write = []
    step = len(heavy_images) * BATCH // TAIL
    for b, start in enumerate(range(0, TAIL, BATCH)):
        batch = from_lambda_event(lambda_event([record(i) for i in tail_images[start : start + BATCH]], "shard-tail"))
        counted = [c for r in batch for c in countable.countables(r, NOW)]
        for target, members in summary_writes.plan(counted):
            calls_per_write.append(summary_writes.write(aws.dynamodb, SETTINGS, target, members, NOW))
        heavy_batch = [record(i) for i in heavy_images[b * step : (b + 1) * step]]
        stream.apply_stream_batch(aws.dynamodb, SETTINGS, from_lambda_event(lambda_event(heavy_batch, "shard-h")), NOW)

    items = [
        item
        for page in aws.dynamodb.get_paginator("scan").paginate(TableName=SETTINGS.counts_table)
        for item in page["Items"]
        if item["pk"]["S"].startswith(keyspace.SUMMARY)
    ]
    # Items: at most 8 parts per hour and per day and one per quarter hour, each under 16 KB.
    assert len(items) <= 24 * (layout.SUMMARY_PARTS + 4) + layout.SUMMARY_PARTS
    assert max(item_size(i) for i in items) < 16 * 1024
    # Writes: one bucket's summary per batch is at most its head read, then a read and a write
    # per part and quarter hour (or one split), whatever the number of values in the batch.
    assert max(calls_per_write) <= 1 + 2 * (layout.SUMMARY_PARTS + 4)

    first, last = DAY_START // 60_000, NOW // 60_000 - 1
    answer = breakdowns.breakdown(aws.dynamodb, SETTINGS, "wide", "provider", first, last, 3, {}, NOW)
    assert answer["exact"] is False
    assert [(v["value"], v["count"]) for v in answer["values"]] == list(HEAVY.items())
    assert answer["bound"] >= 1  # a value not listed had one event: within the bound said
    # Reads: one day's 8 summary parts, the count twice, and the three values' exact counts.
    assert answer["keys_read"] <= layout.SUMMARY_PARTS + 2 * 1 + 3 * 1
