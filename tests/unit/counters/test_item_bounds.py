"""The counting path's items stay under 16 KB by construction: the worst case of each kind of
item, every limit at its maximum, priced by DynamoDB's sizing rules (core/item_sizes.py).

Limits: a counter name of 200 characters; a filter of two dimension values of 128 characters; at
most MAX_SUM_NAMES value names of 64 characters per bucket item (a name finds a slot or is not
summed there: BucketUpdate below); every number at DynamoDB's 38 digits (sums, counts, expiry);
every minute of an hour, and a day's INLINE_MAX inline minutes; stream positions of 40 digits
plus a pack index, for SHARDS shards at once (positions are pruned 48 h after their record).
docs/counting.md, "Item sizes", states the same figures.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from chalicelib.core.dynamo_limits import KB
from chalicelib.core.item_sizes import item_size
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import filters, layout, topk
from chalicelib.counters.bucket_writes import BucketUpdate
from chalicelib.events import dimensions as event_dimensions
from chalicelib.events.ingest import Event

LIMIT = 16 * KB
SHARDS = 16  # shard positions one item holds at once, within which the bound is stated
DIGITS38 = "9" * 38
COUNTER = "c" * 200
PAIR = {("d" * 63) + str(i): "v" * event_dimensions.DIMENSION_VALUE_MAX_CHARS for i in range(2)}
VALUE_NAMES = [("a" * 63) + str(i) for i in range(layout.MAX_SUM_NAMES)]
POSITION = layout.event_position("9" * 40, 999) or ""


def positions(item: dict[str, Any], shards: int, day: bool) -> None:
    for s in range(shards):
        shard = layout.shard_attribute(f"shardId-{s:020d}-{'f' * 8}")
        item[shard] = {"S": layout.stamped_position(POSITION, 9_999_999_999, POSITION, POSITION)}
        if day:
            item[layout.spill_attribute(shard)] = {"S": POSITION}


def worst_bucket_item(resolution: str, shards: int = SHARDS) -> dict[str, Any]:
    """A filter counter's bucket item (its key is longer than the counter's own) at every limit."""
    pk = filters.filter_pk(COUNTER, PAIR)
    item: dict[str, Any] = dict(layout.bucket_item_key(pk, Bucket(resolution, 10**9)))
    for name in ("n", "retention", "expires_at", layout.NOT_SUMMED):
        item[name] = {"N": DIGITS38}
    for slot, name in enumerate(VALUE_NAMES):
        item[layout.slot_name_attribute(slot)] = {"S": name}
        if resolution == "hour":
            for minute in range(60):
                item[layout.slot_minute_attribute(minute, slot)] = {"N": DIGITS38}
        else:
            item[layout.slot_total_attribute(slot)] = {"N": DIGITS38}
    if resolution == "hour":
        for minute in range(60):
            item[layout.minute_attribute(minute)] = {"N": DIGITS38}
    else:
        item[layout.INLINE_COUNT] = {"N": DIGITS38}
        for minute in range(layout.INLINE_MAX):
            item[layout.inline_attribute(1439 - minute)] = {"N": DIGITS38}
    positions(item, shards, day=resolution == "day")
    return item


def worst_summary_item(shards: int = SHARDS) -> dict[str, Any]:
    """A breakdown summary part at its largest: entries fill topk.MAX_BYTES (the longest values,
    every value name, 38-digit sums)."""
    summary = topk.Summary()
    sums = {name: Decimal(DIGITS38) for name in VALUE_NAMES}
    for i in range(40):
        value = f"{i:03d}" + "v" * (event_dimensions.DIMENSION_VALUE_MAX_CHARS - 3)
        summary.add(layout.hour_entry(59, value), 10**18, sums)
    summary.fit()
    key = layout.summary_key(COUNTER, "d" * 64, "hour", 10**9, layout.SUMMARY_PARTS - 1)
    item: dict[str, Any] = {**key, "e": {"S": topk.encode(summary)}}
    for name in ("ver", "retention", "expires_at", "evicted"):
        item[name] = {"N": DIGITS38}
    item["layout"] = {"S": "single"}
    positions(item, shards, day=False)
    return item


@pytest.mark.parametrize("resolution", ["hour", "day"])
def test_given_every_limit_at_its_maximum_when_a_bucket_item_is_priced_then_under_16_kb(resolution: str) -> None:
    item = worst_bucket_item(resolution)
    assert item_size(item) < LIMIT
    # The bound is met with the slots full, not by leaving something out.
    assert len(layout.slots_of(item)) == layout.MAX_SUM_NAMES
    assert len(layout.sums_of(item, None, resolution)) == layout.MAX_SUM_NAMES


def test_given_a_full_summary_part_when_priced_then_under_16_kb() -> None:
    item = worst_summary_item()
    assert topk.encoded_size(topk.decode(item["e"]["S"])) <= topk.MAX_BYTES
    assert item_size(item) < LIMIT


def event(names: list[str], minute: int = 7) -> Event:
    values = {name: Decimal(DIGITS38) for name in names}
    return Event("c", "e", minute * 60_000, 86400, id_given=False, values=values)


def test_given_more_value_names_than_slots_when_added_then_the_first_take_the_slots_and_the_rest_are_counted() -> None:
    update = BucketUpdate()
    names = [f"n{i:02d}" for i in range(20)]
    for start in range(0, 20, 5):
        update.add(Bucket("hour", 0), event(names[start : start + 5]))
    assert sorted(update.slots.values()) == list(range(layout.MAX_SUM_NAMES))
    assert set(update.slots) == set(names[: layout.MAX_SUM_NAMES])
    assert update.unsummed == 20 - layout.MAX_SUM_NAMES
    assert len(update.sums) == layout.MAX_SUM_NAMES  # one minute: one attribute per slot


def test_given_an_item_whose_slots_are_taken_when_new_names_come_then_only_its_own_names_are_summed() -> None:
    stored = {slot: f"old{slot}" for slot in range(layout.MAX_SUM_NAMES)}
    update = BucketUpdate(stored=stored)
    update.add(Bucket("day", 0), event(["new", "old3"]))
    assert update.slots == {"old3": 3}
    assert update.unsummed == 1
    assert update.sums == {layout.slot_total_attribute(3): Decimal(DIGITS38)}


def test_given_an_item_with_free_slots_when_a_name_it_holds_comes_again_then_its_own_slot_is_used() -> None:
    update = BucketUpdate(stored={0: "amount", 2: "bytes"})
    update.add(Bucket("hour", 0), event(["bytes", "tax", "fee"], minute=3))
    assert update.slots == {"bytes": 2, "tax": 1, "fee": 3}
    assert update.unsummed == 0
