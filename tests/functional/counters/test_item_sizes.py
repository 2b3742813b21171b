"""Events at every limit (4 long dimension values, 8 value names of 64 characters with the
largest values accepted, many more value names than an item sums, every minute of an hour) go
through the stream handler twice, on moto; every counts-table item it writes stays under 16 KB,
sums at most MAX_SUM_NAMES names, and holds them exactly.
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from chalicelib.core import decimals
from chalicelib.core.dynamo_limits import KB
from chalicelib.core.item_sizes import item_size
from chalicelib.core.settings import Settings
from chalicelib.counters import layout, reads, stream
from chalicelib.events import dimensions as event_dimensions
from chalicelib.events.stream_records import from_lambda_event
from tests.functional.stream_fixtures import lambda_event, record

HOUR_START = 1_795_003_200_000  # a UTC hour
NOW = HOUR_START + 3_600_000
MINUTE = 60_000
SETTINGS = Settings()
COUNTER = "c" * 200
BIG = event_dimensions.VALUE_MAX  # 24 digits: the longest value an event may carry
_serialize = TypeSerializer().serialize
_ids = itertools.count()


def image(t: int, values: dict[str, Decimal]) -> dict[str, Any]:
    n = next(_ids)
    dims = {f"{'d' * 63}{i}": f"{i}" + "v" * 127 for i in range(4)}
    plain = {
        "pk": f"q#{n % 2}",
        "sk": f"2026-11-18T08:26:40.000Z#{n:08d}",
        "kind": "event",
        "counter": COUNTER,
        "id": f"gen-{n}",
        "id_given": False,
        "time": t,
        "retention": 7 * 86400,
        "dimensions": dims,
        "values": values,
    }
    return {k: _serialize(v) for k, v in plain.items()}


def names(group: int) -> list[str]:
    return [f"{group}{'a' * 62}{i}" for i in range(8)]


def test_given_events_at_every_limit_delivered_twice_when_counted_then_every_item_under_16_kb_and_sums_exact(
    aws: Any,
) -> None:
    # 3 groups of 8 value names (24 in all), each in every minute of one hour: the first group's
    # events come first, so they take the 8 slots of every item.
    images = [
        image(HOUR_START + minute * MINUTE + group, {name: BIG for name in names(group)})
        for group in range(3)
        for minute in range(60)
    ]
    records = [record(i) for i in images]
    # Batches of 10: an update's expression names every minute and slot it adds to (AWS takes
    # expressions up to 4 KB, and refuses a longer one, which the processor halves; moto 5 recurses).
    for _ in range(2):  # every batch delivered twice
        for start in range(0, len(records), 10):
            stream.apply_stream_batch(
                aws.dynamodb, SETTINGS, from_lambda_event(lambda_event(records[start : start + 10], "s-0")), NOW
            )

    items = [
        item
        for page in aws.dynamodb.get_paginator("scan").paginate(TableName=SETTINGS.counts_table)
        for item in page["Items"]
    ]
    counted = [i for i in items if i["pk"]["S"].startswith(("CTR#", "FLT#", "TOP#"))]
    assert {i["pk"]["S"][:4] for i in counted} == {"CTR#", "FLT#", "TOP#"}
    assert max(item_size(i) for i in items) < 16 * KB
    buckets = [i for i in counted if not i["pk"]["S"].startswith("TOP#")]
    assert len(buckets) == 2 * (1 + 4 + 6)  # an hour and a day of the counter and of its 10 filters
    for item in buckets:
        assert layout.slots_of(item) == dict(enumerate(names(0)))
        assert layout.not_summed(item) == 2 * 60 * 8  # the other groups' values, once each

    answer = reads.count_window(aws.dynamodb, SETTINGS, COUNTER, NOW // MINUTE - 60, NOW // MINUTE - 1, NOW)
    assert answer.count == 180
    assert answer.sums == {name: decimals.EXACT.multiply(BIG, Decimal(60)) for name in names(0)}
    # A partial hour, read from the minutes' sums.
    part = reads.count_window(
        aws.dynamodb, SETTINGS, COUNTER, HOUR_START // MINUTE + 10, HOUR_START // MINUTE + 19, NOW
    )
    assert part.sums == {name: decimals.EXACT.multiply(BIG, Decimal(10)) for name in names(0)}
    assert answer.as_dict()["sums_complete"] is False
