"""The sums a repair writes on a recounted bucket item (counters/recounted_sums.py), against
brute force: applied to any stored item, the change leaves sums that read exactly what the
events hold for every name the item sums, `vx` counting the values of the others, no more names
than slots, and a second recount changing nothing."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.core import timebuckets
from chalicelib.core.dynamo_limits import KB
from chalicelib.core.item_sizes import item_size
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import layout, recounted_sums, repair
from chalicelib.counters.bucket_writes import BucketUpdate
from chalicelib.events.ingest import Event
from tests.unit.counters.test_item_bounds import DIGITS38, VALUE_NAMES, worst_bucket_item

NAMES = [f"n{i}" for i in range(12)]
HOUR = Bucket("hour", 0)
DAY = Bucket("day", 0)


def applied(item: dict[str, Any], change: recounted_sums.SumsChange) -> dict[str, Any]:
    after = {k: v for k, v in item.items() if k not in change.removes}
    after.update(change.sets)
    return after


def truth(events: list[Event], first: int = 0, last: int = 59) -> dict[str, Decimal]:
    sums: dict[str, Decimal] = {}
    for e in events:
        if first <= timebuckets.minute_of_hour(e.time_ms) <= last:
            for name, amount in e.values.items():
                sums[name] = sums.get(name, Decimal(0)) + amount
    return sums


events_strategy = st.lists(
    st.builds(
        lambda minute, values: Event("c", "e", minute * 60_000 + 1, 86400, id_given=False, values=values),
        st.integers(0, 59),
        st.dictionaries(
            st.sampled_from(NAMES), st.decimals(-(10**6), 10**6, places=2, allow_nan=False), min_size=1, max_size=8
        ),
    ),
    max_size=40,
)


@st.composite
def stored_items(draw: Any) -> dict[str, Any]:
    """An item as the stream (or an earlier write) may have left it: some slots named, some
    sums and a `vx` that need not be right."""
    item: dict[str, Any] = {"n": {"N": "1"}}
    slots = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=layout.MAX_SUM_NAMES))
    for slot, name in zip(draw(st.permutations(range(layout.MAX_SUM_NAMES))), slots, strict=False):
        item[layout.slot_name_attribute(slot)] = {"S": name}
        item[layout.slot_minute_attribute(draw(st.integers(0, 59)), slot)] = {"N": "3"}
        item[layout.slot_total_attribute(slot)] = {"N": "3"}
    if draw(st.booleans()):
        item[layout.NOT_SUMMED] = {"N": "2"}
    return item


@settings(max_examples=200, deadline=None)
@given(stored_items(), events_strategy, st.sampled_from([HOUR, DAY]), st.integers(0, 59), st.integers(0, 59))
def test_given_any_stored_item_when_its_sums_are_recounted_then_they_read_as_brute_force_and_a_second_recount_is_empty(
    item: dict[str, Any], events: list[Event], bucket: Bucket, a: int, b: int
) -> None:
    resolution = bucket.resolution
    after = applied(item, recounted_sums.change(item, recounted_sums.recount(item, bucket, events)))

    summed = {**{v: 1 for v in layout.slots_of(after).values()}}
    first, last = min(a, b), max(a, b)
    read = layout.sums_of(after, (first, last) if resolution == "hour" else None, resolution)
    expected = truth(events, first, last) if resolution == "hour" else truth(events)
    assert read == {n: s for n, s in expected.items() if n in summed}
    assert layout.not_summed(after) == sum(1 for e in events for n in e.values if n not in summed)
    assert len(layout.slots_of(after)) <= layout.MAX_SUM_NAMES
    # A name is summed only while some event carries it.
    assert set(summed) == {n for e in events for n in e.values} & set(summed)
    slot_names = set(layout.slots_of(after).values())
    # Values go unsummed only when every slot is taken.
    if layout.not_summed(after):
        assert len(slot_names) == layout.MAX_SUM_NAMES
    assert not recounted_sums.change(after, recounted_sums.recount(after, bucket, events))


def test_given_an_item_the_stream_counted_when_recounted_then_nothing_changes() -> None:
    events = [
        Event("c", f"e{i}", (i % 5) * 60_000, 86400, id_given=False, values={NAMES[i % 10]: Decimal(f"{i}.50")})
        for i in range(30)
    ]
    for bucket in (HOUR, DAY):
        update = BucketUpdate(stored={})
        for e in events:
            update.add(bucket, e)
        # As DynamoDB stores what the stream ADDs: numbers normalized (1.50 as 1.5).
        item: dict[str, Any] = {a: {"N": str(s.normalize())} for a, s in update.sums.items()}
        item.update({layout.slot_name_attribute(s): {"S": n} for n, s in update.slots.items()})
        item[layout.NOT_SUMMED] = {"N": str(update.unsummed)}
        assert update.unsummed > 0
        assert not recounted_sums.change(item, recounted_sums.recount(item, bucket, events))


def test_given_the_worst_bucket_item_when_recounted_with_new_names_then_it_stays_under_16_kb() -> None:
    # Events of 8 names the item does not sum (their values go to `vx`) and of all 8 it does.
    for bucket in (Bucket("hour", 10**9), Bucket("day", 10**9)):
        item = worst_bucket_item(bucket.resolution)
        events = [
            Event("c", "e", m * 60_000, 86400, id_given=False, values={n: Decimal(DIGITS38[:30]) for n in names})
            for m in range(60)
            for names in (VALUE_NAMES, [f"x{i}" for i in range(8)])
        ]
        after = applied(item, recounted_sums.change(item, recounted_sums.recount(item, bucket, events)))
        assert item_size(after) < 16 * KB
        assert layout.not_summed(after) == 60 * 8


def test_given_every_minute_and_slot_to_write_when_split_then_each_expression_is_under_4_kb_and_the_clause_cap() -> (
    None
):
    item = worst_bucket_item("hour")
    events = [
        Event("c", "e", m * 60_000, 86400, id_given=False, values={n: Decimal(1) for n in VALUE_NAMES})
        for m in range(60)
    ]
    change = recounted_sums.change(item, recounted_sums.recount(item, Bucket("hour", 10**9), events))
    first = repair._Clauses({"#n": "n"}, {":n": {"N": "60"}}, ["#n = :n"])
    for m in range(60):
        first.sets.append(f"#m{m} = :m{m}")
    later = repair._with_sums(first, change)
    written = {first.names[p] for p in first.names} | {a for c in later for a in c.names.values()}
    assert len(change.sets) == 60 * 8 and set(change.sets) <= written
    assert all(len(c.expression().encode()) <= 4096 for c in [first, *later]) and later
    assert all(len(c.sets) + len(c.removes) <= repair.EXPRESSION_CLAUSES for c in [first, *later])
