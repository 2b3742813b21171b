"""Exactly-once windowed counting under Lambda's delivery rules, on moto.

Every bucket item carries how far each stream shard has been applied to it, so these tests
deliver batches the ways Lambda may (again, cut differently, after a handler died after any
number of writes, several shards at once on one hot counter, one partition key's records
through two shards in any order, parent then child shards) and compare every bucket with the
truth (brute force). One test breaks the order guarantee on purpose (one shard read out of
order) and shows that the count then comes out short and the `out_of_sequence` metric says so.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeSerializer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chalicelib.core import keyspace, timebuckets
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.settings import Settings
from chalicelib.counters import layout, stream
from chalicelib.counters import reads as counters_reads
from chalicelib.events.stream_records import from_lambda_event
from tests.fakes import Dying, Killed, checking, failing, recording
from tests.functional.helpers import accounts, bucket_counts, partition
from tests.functional.stream_fixtures import SHARD, image, lambda_event, record

NOW = 1_795_000_000_000
MINUTE = 60_000
SETTINGS = Settings()
_serializer = TypeSerializer()
_names = itertools.count()


def apply(dynamodb: Any, records: list[dict[str, Any]], now: int = NOW, shard: str = SHARD) -> BatchResult:
    """One Lambda batch of one stream shard."""
    return stream.apply_stream_batch(
        dynamodb, SETTINGS, from_lambda_event(lambda_event(records, shard)), now, lambda s: None
    )


def stored_buckets(dynamodb: Any, counter: str) -> dict[str, dict[str, Any]]:
    return {i["sk"]["S"]: i for i in partition(dynamodb, f"{keyspace.COUNTER}{counter}")}


def true_counts(images: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """Per (counter, bucket sort key) the number of distinct events (a client id counts once)."""
    seen: set[tuple[str, str]] = set()
    counts: Counter[tuple[str, str]] = Counter()
    for img in images:
        counter, event_id = img["counter"]["S"], img["id"]["S"]
        if (counter, event_id) in seen:
            continue
        seen.add((counter, event_id))
        for bucket in timebuckets.buckets_for(int(img["time"]["N"])):
            prefix = "h" if bucket.resolution == "hour" else "d"
            counts[(counter, f"{prefix}#{bucket.index:010d}")] += 1
    return dict(counts)


def assert_exact(dynamodb: Any, images: list[dict[str, Any]]) -> None:
    truth = true_counts(images)
    stored = {
        (counter, sk): n
        for counter in {c for c, _ in truth}
        for sk, n in bucket_counts(list(stored_buckets(dynamodb, counter).values())).items()
    }
    assert stored == truth


def hour_spread_images(partitions: list[str], counters: list[str], n: int) -> list[dict[str, Any]]:
    return [image(partitions[i % len(partitions)], counters[i % len(counters)], NOW - i * 7 * MINUTE) for i in range(n)]


def test_given_generated_ids_when_every_batch_delivered_twice_and_recut_then_exact(aws: Any) -> None:
    images = hour_spread_images(["p1#0", "p1#1", "p1#2"], ["a", "b"], 120)
    records = [record(i) for i in images]
    for start in range(0, len(records), 25):
        batch = records[start : start + 25]
        assert apply(aws.dynamodb, batch).counted == len(batch)
        again = apply(aws.dynamodb, batch)
        assert (again.counted, again.duplicates, again.details["redelivered"]) == (0, len(batch), len(batch))
    for start in range(0, len(records), 40):  # the whole stream again, cut differently
        assert apply(aws.dynamodb, records[start : start + 40]).counted == 0
    assert_exact(aws.dynamodb, images)


@pytest.mark.parametrize("after", [False, True], ids=["before-write", "after-write"])
@pytest.mark.parametrize("die_on", [1, 2, 3, 50, 200])
def test_given_handler_dies_after_k_writes_when_batch_redelivered_then_exact(
    aws: Any, die_on: int, after: bool
) -> None:
    # 300 events over 55 hours, 4 counters: about 230 bucket items, one UpdateItem each; a
    # third carry client ids, so the handler may also die between a claim and its buckets.
    images = [
        image(f"p2#{i % 2}", "cdef"[i % 4], NOW - i * 11 * MINUTE, client_id=f"order-{i}" if i % 3 == 0 else None)
        for i in range(300)
    ]
    records = [record(i) for i in images]
    dying = Dying(aws.dynamodb, die_on, after)
    with pytest.raises(Killed):
        apply(dying, records)
    result = apply(aws.dynamodb, records)
    assert result.counted + result.duplicates == len(records)
    assert result.details["out_of_sequence"] == 0
    assert_exact(aws.dynamodb, images)
    assert audit(aws.dynamodb, "p2#0")["applied"] == 150 and audit(aws.dynamodb, "p2#1")["applied"] == 150


def test_given_batch_holding_whole_stream_prefix_when_partly_applied_then_items_name_exactly_what_was(
    aws: Any,
) -> None:
    images = [image("p3#0", "e", NOW - i * MINUTE) for i in range(10)]
    records = [record(i) for i in images]
    apply(aws.dynamodb, records[:4])
    # Lambda retries from its checkpoint with a longer batch: the first four are known.
    result = apply(aws.dynamodb, records)
    assert (result.counted, result.duplicates, result.details["redelivered"]) == (6, 4, 4)
    assert_exact(aws.dynamodb, images)


def test_given_shards_applied_concurrently_on_one_hot_counter_when_redelivered_then_exact(aws: Any) -> None:
    shards = {w: [image(f"p4#{w}", "hot", NOW - i * 1000) for i in range(60)] for w in range(4)}
    records = {w: [record(i) for i in imgs] for w, imgs in shards.items()}
    errors: list[BaseException] = []

    def run(shard: str, stream: list[dict[str, Any]]) -> None:
        try:
            for start in range(0, len(stream), 15):
                batch = stream[start : start + 15]
                apply(aws.dynamodb, batch, shard=shard)
                apply(aws.dynamodb, batch, shard=shard)  # and again: at least once
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"shardId-{w}", r)) for w, r in records.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert_exact(aws.dynamodb, [i for imgs in shards.values() for i in imgs])


# -- one events partition key through two shards (adaptive capacity split it by sort key) --------

PARENT, CHILD_A, CHILD_B = "shardId-00000001795000000000-aaaa0001", "shardId-0002-b", "shardId-0003-c"


def split_partition(n: int, counters: str = "uv") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One partition key's events, split at a sort key: the lower half in one shard, the upper
    half in another (records numbered in write order across both, as DynamoDB may)."""
    images = [image("split#0", counters[i % len(counters)], NOW - (i % 50) * MINUTE, seq=i) for i in range(n)]
    records = [record(i) for i in images]
    return images, records


@pytest.mark.parametrize("order", ["later-shard-first", "interleaved", "redelivered"])
def test_given_one_partition_key_through_two_shards_when_applied_in_any_order_then_exact(aws: Any, order: str) -> None:
    images, records = split_partition(93 + 101)
    low, high = records[: len(records) // 2], records[len(records) // 2 :]
    shard_of = {id(r): CHILD_A for r in low} | {id(r): CHILD_B for r in high}
    a_batches = [low[i : i + 20] for i in range(0, len(low), 20)]
    b_batches = [high[i : i + 20] for i in range(0, len(high), 20)]
    if order == "later-shard-first":
        plan = [(CHILD_B, b) for b in b_batches] + [(CHILD_A, b) for b in a_batches]
    elif order == "interleaved":
        plan = [p for pair in itertools.zip_longest(a_batches, b_batches) for p in pair if p]
        plan = [(shard_of[id(b[0])], b) for b in plan]
    else:
        plan = [(CHILD_A, b) for b in a_batches for _ in range(2)] + [(CHILD_B, b) for b in b_batches for _ in range(2)]
    skipped = 0
    for shard, batch in plan:
        skipped += apply(aws.dynamodb, batch, shard=shard).details["out_of_sequence"]
    assert skipped == 0
    assert_exact(aws.dynamodb, images)
    for batch in b_batches:  # a shard replayed by hand after it was done: counted nowhere again
        assert apply(aws.dynamodb, batch, shard=CHILD_B).counted == 0
    assert_exact(aws.dynamodb, images)
    assert audit(aws.dynamodb, "split#0")["applied"] == len(images)


def test_given_parent_shard_then_its_children_when_applied_then_exact(aws: Any) -> None:
    """Lambda finishes a parent shard before its children; each keeps its own position."""
    images, records = split_partition(90)
    apply(aws.dynamodb, records[:30], shard=PARENT)
    apply(aws.dynamodb, records[30:60], shard=CHILD_A)
    apply(aws.dynamodb, records[60:], shard=CHILD_B)
    apply(aws.dynamodb, records[30:60], shard=CHILD_A)  # a child's batch again
    assert_exact(aws.dynamodb, images)


def test_given_one_shard_read_out_of_its_order_when_applied_then_count_short_and_it_shows(aws: Any) -> None:
    """The guarantee relied on: ONE SHARD's records arrive in sequence order (ParallelizationFactor
    1). Break it (a later batch of the shard first, as a second concurrent reader would) and the
    earlier records look applied: the count comes out short, and `out_of_sequence` says so."""
    images = [image("p5#0", "order", NOW - i * MINUTE) for i in range(10)]
    records = [record(i) for i in images]
    apply(aws.dynamodb, records[5:])
    late = apply(aws.dynamodb, records[:5])
    assert late.duplicates == 5 and late.counted == 0 and late.details["out_of_sequence"] == 5
    with pytest.raises(AssertionError):
        assert_exact(aws.dynamodb, images)
    # A real redelivery is told apart: the positions it meets are its own.
    again = apply(aws.dynamodb, records[5:])
    assert again.details["redelivered"] == 5 and again.details["out_of_sequence"] == 0


def test_given_client_ids_retried_across_batches_partitions_and_shards_when_applied_then_counted_once(
    aws: Any,
) -> None:
    first = image("p6#0", "orders", NOW - MINUTE, client_id="order-1")
    retried = dict(first, pk={"S": "p6#3"}, sk={"S": "2026-11-18T08:27:00.000Z#retry"})
    other = image("p6#1", "orders", NOW - 2 * MINUTE)
    apply(aws.dynamodb, [record(first), record(other)])
    assert apply(aws.dynamodb, [record(retried)], shard=CHILD_B).duplicates == 1
    assert_exact(aws.dynamodb, [first, other])
    assert audit(aws.dynamodb, "p6#3") == {"applied": 0, "set_aside": 0, "expired": 0, "duplicates": 1}


def test_given_client_id_claimed_when_handler_died_before_its_buckets_then_redelivery_counts_it(aws: Any) -> None:
    img = image("p6#5", "claims", NOW - MINUTE, client_id="order-9")
    rec = record(img)
    with pytest.raises(Killed):
        apply(Dying(aws.dynamodb, 2), [rec])  # the claim is written, the buckets are not
    assert apply(aws.dynamodb, [rec]).counted == 1
    assert apply(aws.dynamodb, [rec]).duplicates == 1
    assert_exact(aws.dynamodb, [img])


# -- inline minutes: a quiet counter's first events of a day cost one write ---------------------


def test_given_a_lone_event_when_counted_then_one_write_holds_it_in_its_day(aws: Any) -> None:
    calls: list[dict[str, Any]] = []
    apply(recording(aws.dynamodb, "update_item", calls), [record(image("p7#0", "lone", NOW - MINUTE))])
    assert [c["Key"]["sk"]["S"][:2] for c in calls if c["Key"]["pk"]["S"] == f"{keyspace.COUNTER}lone"] == ["d#"]
    (day,) = stored_buckets(aws.dynamodb, "lone").values()
    assert layout.inline_minutes(day) == {timebuckets.minute_of(NOW - MINUTE) % 1440: 1}


@pytest.mark.parametrize("die_on", [1, 2, 3, 4])
@pytest.mark.parametrize("after", [False, True], ids=["before-write", "after-write"])
def test_given_a_counter_passing_the_inline_room_when_batches_die_and_come_back_recut_then_exact(
    aws: Any, die_on: int, after: bool
) -> None:
    """Which events a day holds inline is decided once, on the day item (x: per shard): a
    redelivery cut differently, after the handler died between the day and its hours, puts
    every event where the first delivery put it."""
    images = [image("p7#1", "spill", NOW - i * 7 * MINUTE) for i in range(layout.INLINE_MAX + 5)]
    records = [record(i) for i in images]
    apply(aws.dynamodb, records[:5])
    with contextlib.suppress(Killed):  # a write that fails its condition is not one it dies after
        apply(Dying(aws.dynamodb, die_on, after), records[5:11])
    for start in range(0, len(records), 3):
        apply(aws.dynamodb, records[start : start + 3])
    assert_exact(aws.dynamodb, images)
    day = next(i for sk, i in stored_buckets(aws.dynamodb, "spill").items() if sk.startswith("d#"))
    assert sum(layout.inline_minutes(day).values()) == int(day[layout.INLINE_COUNT]["N"])
    assert int(day[layout.INLINE_COUNT]["N"]) <= layout.INLINE_MAX


def test_given_an_hour_split_between_inline_and_its_item_when_its_item_expires_then_the_inline_events_stay(
    aws: Any,
) -> None:
    """A long-lived event held inline and later short-lived events spilled to the hour item: once
    the hour item is past its events' retention, the inline minutes still count (they live by
    their day item's retention, the longest of its events)."""
    hour = timebuckets.buckets_for(NOW)[0]
    start = hour.start_ms
    long_lived = image("p7#3", "mixed", start, retention=7200)
    short = [image("p7#3", "mixed", start + (i + 1) * MINUTE, retention=60) for i in range(10)]
    for batch in ([long_lived], short[:7], short[7:]):  # 8 held inline, then 3 in the hour item
        apply(aws.dynamodb, [record(i) for i in batch], now=start + 11 * MINUTE)
    first = hour.first_minute
    later = hour.end_ms + 120_000  # the hour item (retention 60) is past its expiry
    answer = counters_reads.count_window(aws.dynamodb, SETTINGS, "mixed", first, first + 59, later)
    assert answer.count == layout.INLINE_MAX  # the inline ones, the 7,200-second event among them
    assert (
        counters_reads.count_window(aws.dynamodb, SETTINGS, "mixed", first, first + 59, start + 12 * MINUTE).count == 11
    )


def test_given_an_hour_split_between_inline_and_its_item_when_its_item_expires_then_histograms_keep_the_hour(
    aws: Any,
) -> None:
    """The same hour in a histogram of hours and of minutes: it is judged by what holds its
    minutes (its item, and its day's inline minutes), so it stays, with its inline events, after
    its item expired; and it goes once the day's retention no longer covers it."""
    hour = timebuckets.buckets_for(NOW)[0]
    start = hour.start_ms
    long_lived = image("p7#4", "mixed-h", start, retention=7200)
    short = [image("p7#4", "mixed-h", start + (i + 1) * MINUTE, retention=60) for i in range(10)]
    for batch in ([long_lived], short[:7], short[7:]):  # 8 held inline, then 3 in the hour item
        apply(aws.dynamodb, [record(i) for i in batch], now=start + 11 * MINUTE)
    first = hour.first_minute

    def hours(now: int) -> dict[str, Any]:
        return counters_reads.histogram(aws.dynamodb, SETTINGS, "mixed-h", first - 60, first + 59, "hour", now)

    def minutes(now: int) -> dict[str, Any]:
        return counters_reads.histogram(aws.dynamodb, SETTINGS, "mixed-h", first, first + 59, "minute", now)

    alive = start + 12 * MINUTE
    assert [b["count"] for b in hours(alive)["buckets"]] == [0, 11]
    assert [b["count"] for b in minutes(alive)["buckets"]][:12] == [1] * 11 + [0]

    later = hour.end_ms + 120_000  # the hour item (retention 60) is past its expiry, the day's 7,200 s not
    by_hour, by_minute = hours(later), minutes(later)

    assert [b["count"] for b in by_hour["buckets"]] == [0, layout.INLINE_MAX] and by_hour["complete"]
    assert [b["count"] for b in by_minute["buckets"]][:12] == [1] * layout.INLINE_MAX + [0] * 4
    assert by_minute["complete"]
    assert sum(b["count"] for b in by_hour["buckets"]) == (
        counters_reads.count_window(aws.dynamodb, SETTINGS, "mixed-h", first - 60, first + 59, later).count
    )

    gone = hour.end_ms + 7200 * 1000 + MINUTE  # past the day's retention over this hour too
    assert [b["count"] for b in hours(gone)["buckets"]] == [0, 0] and not hours(gone)["complete"]


def test_given_stream_event_without_shard_id_when_applied_then_batch_fails_and_nothing_written(aws: Any) -> None:
    event = lambda_event([record(image("p6#8", "noshard", NOW))])
    del event["shardId"]
    with pytest.raises(stream.ShardUnknownError):
        stream.apply_stream_batch(aws.dynamodb, SETTINGS, from_lambda_event(event), NOW)
    assert stored_buckets(aws.dynamodb, "noshard") == {}


def test_given_position_older_than_the_stream_can_redeliver_when_item_written_again_then_pruned(aws: Any) -> None:
    first = record(image("p6#9", "prune", NOW - MINUTE))
    first["dynamodb"]["ApproximateCreationDateTime"] = (NOW // 1000) - 3 * 86400
    apply(aws.dynamodb, [first], shard=PARENT)
    later = image("p6#9", "prune", NOW - MINUTE)
    result = apply(aws.dynamodb, [record(later)], shard=CHILD_A)
    stored = stored_buckets(aws.dynamodb, "prune")
    # Each item written (the day, holding both minutes inline) drops the parent's position.
    assert result.details["positions_pruned"] == len(stored) >= 1
    for item in stored.values():
        shards = [name for name in item if name.startswith(("s:", layout.SPILL_PREFIX))]
        child = layout.shard_attribute(CHILD_A)
        assert set(shards) <= {child, layout.spill_attribute(child)} and child in shards
    assert set(bucket_counts(list(stored.values())).values()) == {2}


def audit(dynamodb: Any, events_pk: str) -> dict[str, int]:
    numbers = accounts(dynamodb, events_pk)
    return {k: numbers[k] for k in ("applied", "set_aside", "expired", "duplicates")}


@st.composite
def deliveries(draw: Any) -> tuple[list[dict[str, Any]], list[tuple[int, int, int | None, bool, bool]]]:
    """Events of a few partition keys, each record in one of a few stream shards whatever its
    partition key (a split partition), and a schedule Lambda's rules allow: a shard's records
    in order from its checkpoint, in batches of any size; a batch may die before or right after
    any of its writes; a checkpoint may fail to advance after a success (the batch comes
    again); shards interleave freely, a later shard before an earlier one."""
    example = next(_names)
    shard_count = draw(st.integers(1, 3))
    n = draw(st.integers(1, 30))
    images: list[dict[str, Any]] = []
    for i in range(n):
        shard = draw(st.integers(0, shard_count - 1))
        pk = f"q{example}#{draw(st.integers(0, 1))}"
        counter = draw(st.sampled_from(["x", "y"]))
        t = NOW - draw(st.integers(0, 50 * 60)) * MINUTE
        if draw(st.integers(0, 3)) == 0:  # a client id; sometimes one the client sent before
            earlier = [
                img for img in images if img["id_given"]["BOOL"] and img["counter"]["S"] == f"{counter}{example}"
            ]
            if earlier and draw(st.booleans()):
                twin = draw(st.sampled_from(earlier))
                images.append(dict(twin, pk={"S": pk}, sk={"S": f"retry-{i}"}, stream_shard=shard))
                continue
            images.append(dict(image(pk, f"{counter}{example}", t, client_id=f"id-{i}", seq=i), stream_shard=shard))
        else:
            images.append(dict(image(pk, f"{counter}{example}", t, seq=i), stream_shard=shard))
    schedule = draw(
        st.lists(
            st.tuples(
                st.integers(0, shard_count - 1),  # which shard's poller runs
                st.integers(1, 12),  # batch size
                st.one_of(st.none(), st.integers(1, 8)),  # dies on this write
                st.booleans(),  # ...after it was written
                st.booleans(),  # checkpoint saved after a success
            ),
            max_size=25,
        )
    )
    return images, schedule


def test_given_any_lambda_delivery_schedule_over_split_partitions_when_drained_then_every_bucket_exact(
    aws: Any,
) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(deliveries())
    def check(case: tuple[list[dict[str, Any]], list[tuple[int, int, int | None, bool, bool]]]) -> None:
        tagged, schedule = case
        images = [{k: v for k, v in img.items() if k != "stream_shard"} for img in tagged]
        by_shard: dict[int, list[dict[str, Any]]] = {}
        for img, plain in zip(tagged, images, strict=True):  # each record once, in write order, in its shard
            by_shard.setdefault(img["stream_shard"], []).append(record(plain))
        checkpoint = dict.fromkeys(by_shard, 0)
        for shard, size, die_on, after, saved in schedule:
            if shard not in by_shard:
                continue
            batch = by_shard[shard][checkpoint[shard] : checkpoint[shard] + size]
            if not batch:
                continue
            client = aws.dynamodb if die_on is None else Dying(aws.dynamodb, die_on, after)
            try:
                apply(client, batch, shard=f"shard-{shard}")
            except Killed:
                continue  # Lambda delivers from the checkpoint again
            if saved:
                checkpoint[shard] += len(batch)
        for shard, records in by_shard.items():  # Lambda keeps going until each shard is done
            while checkpoint[shard] < len(records):
                batch = records[checkpoint[shard] : checkpoint[shard] + 7]
                assert apply(aws.dynamodb, batch, shard=f"shard-{shard}").details["out_of_sequence"] == 0
                checkpoint[shard] += len(batch)
        assert_exact(aws.dynamodb, images)
        distinct = {(i["counter"]["S"], i["id"]["S"]) for i in images}
        audited = [audit(aws.dynamodb, pk) for pk in {i["pk"]["S"] for i in images}]
        assert sum(a["applied"] for a in audited) == len(distinct)
        assert sum(a["applied"] + a["duplicates"] for a in audited) == len(images)

    check()


# -- retention: a bucket lives as long as the longest retention counted in it --------------------


@st.composite
def retention_mixes(draw: Any) -> tuple[list[dict[str, Any]], list[int]]:
    example = next(_names)
    n = draw(st.integers(1, 12))
    images = [
        image(
            f"r{example}#0",
            f"ret{example}",
            NOW - draw(st.integers(0, 180)) * MINUTE,
            retention=draw(st.sampled_from([60, 3600, 90_000, 7 * 86400])),
        )
        for _ in range(n)
    ]
    order = draw(st.permutations(range(n)))
    cuts = sorted(draw(st.lists(st.integers(1, max(1, n - 1)), max_size=4)))
    return [images[i] for i in order], cuts


def test_given_any_mix_of_retentions_and_arrivals_when_counted_then_expiry_is_end_plus_longest(aws: Any) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(retention_mixes())
    def check(case: tuple[list[dict[str, Any]], list[int]]) -> None:
        arrivals, cuts = case
        records = [record(i) for i in arrivals]
        for start, stop in zip([0, *cuts], [*cuts, len(records)], strict=True):
            apply(aws.dynamodb, records[start:stop])  # arrivals in batches, in the order drawn
        longest: dict[str, int] = {}
        for img in arrivals:
            t, retention = int(img["time"]["N"]), int(img["retention"]["N"])
            for bucket in timebuckets.buckets_for(t):
                if timebuckets.expires_at_s(bucket, retention) * 1000 > NOW:  # otherwise not counted there
                    sk = f"{'h' if bucket.resolution == 'hour' else 'd'}#{bucket.index:010d}"
                    longest[sk] = max(longest.get(sk, 0), retention)
        stored = stored_buckets(aws.dynamodb, arrivals[0]["counter"]["S"])
        # Every day is stored; an hour whose events its day holds inline has no item of its own.
        assert {sk for sk in stored if sk.startswith("d")} == {sk for sk in longest if sk.startswith("d")}
        assert set(stored) <= set(longest)
        for sk, item in stored.items():
            resolution = "hour" if sk.startswith("h") else "day"
            bucket = timebuckets.Bucket(resolution, int(sk.split("#")[1]))
            if resolution == "day":
                assert Decimal(item["expires_at"]["N"]) == bucket.end_ms // 1000 + longest[sk]
                assert Decimal(item["retention"]["N"]) == longest[sk]
            else:  # an hour item holds the events its day does not hold inline: their longest
                assert Decimal(item["retention"]["N"]) <= longest[sk]
                assert Decimal(item["expires_at"]["N"]) == bucket.end_ms // 1000 + int(item["retention"]["N"])

    check()


# -- poison records: set aside alone on first delivery, the rest counted ---------------------------


def rejects_counter(real: Any) -> Any:
    """DynamoDB refusing an update because of one record's data (here: any write to the counter
    `refused`), as it does for data moto accepts."""
    return failing(real, "update_item", "ValidationException", lambda kwargs: "CTR#refused" in str(kwargs["Key"]))


def test_given_one_poison_record_of_each_kind_when_batch_delivered_then_good_counted_and_each_set_aside_once(
    aws: Any,
) -> None:
    good = [image(f"p7#{i % 2}", "mixed", NOW - i * MINUTE) for i in range(6)]
    undeserializable = image("p7#0", "mixed", NOW)
    undeserializable["time"] = {"N": "1e999999"}  # overflows the SDK's decimal context
    bad_counter = image("p7#0", "mixed", NOW)
    bad_counter["counter"] = {"S": "mi\udc00xed"}
    bad_id = image("p7#1", "mixed", NOW, client_id="order-\udc00x")
    no_key = image("p" * 2100, "mixed", NOW)  # its audit item's key would be too long
    refused = image("p7#1", "refused", NOW)
    bad_time = {**image("p7#0", "mixed", NOW), "time": {"S": "not a time"}}
    no_counter = {k: v for k, v in image("p7#0", "mixed", NOW).items() if k != "counter"}
    garbage = {"pk": {"Q": "?"}, "sk": {"S": "?"}}  # not an image DynamoDB writes: no partition to audit
    poison = [undeserializable, bad_counter, bad_id, no_key, refused, bad_time, no_counter, garbage]
    records = [
        record(i)
        for i in [good[0], good[1], *poison[:3], good[2], good[3], *poison[3:5], good[4], *poison[5:], good[5]]
    ]
    client = rejects_counter(aws.dynamodb)

    result = apply(client, records)
    assert result.counted == len(good)
    assert len(result.quarantined) == len(poison)
    assert_exact(aws.dynamodb, good)
    stored = quarantined(aws.dynamodb)
    poison_ids = {r["eventID"] for r in records if r["dynamodb"]["NewImage"] in poison}
    assert set(stored) == poison_ids
    assert all(reason for reason in stored.values())
    assert "deserialized" in stored[records[2]["eventID"]]
    assert "counter" in stored[records[3]["eventID"]]
    assert "refused" in stored[records[8]["eventID"]]
    assert audit(aws.dynamodb, "p7#1")["set_aside"] == 2 and audit(aws.dynamodb, "p7#1")["applied"] == 3
    # p7#0: the bad counter, the bad time and the missing counter; the image that cannot be
    # deserialized names no partition, so no audit item can count it.
    assert audit(aws.dynamodb, "p7#0")["set_aside"] == 3 and audit(aws.dynamodb, "p7#0")["applied"] == 3

    again = apply(client, records)  # redelivered: nothing counted twice, nothing set aside twice
    assert again.counted == 0 and again.duplicates == len(good)
    assert_exact(aws.dynamodb, good)
    assert quarantined(aws.dynamodb) == stored
    assert audit(aws.dynamodb, "p7#1")["set_aside"] == 2 and audit(aws.dynamodb, "p7#1")["applied"] == 3


def quarantined(dynamodb: Any) -> dict[str, str]:
    return {i["sk"]["S"]: i["reason"]["S"] for i in partition(dynamodb, f"{keyspace.QUARANTINE}events-stream")}


def test_given_storage_unavailable_when_batch_applied_then_batch_fails_and_nothing_set_aside(aws: Any) -> None:
    from chalicelib.core.errors import StorageError

    with pytest.raises(StorageError):
        apply(failing(aws.dynamodb, "update_item", "ServiceUnavailable"), [record(image("p8#0", "down", NOW))])
    assert quarantined(aws.dynamodb) == {}


def test_given_a_bug_raising_key_error_in_a_storage_call_when_batch_applied_then_it_fails_and_nothing_set_aside(
    aws: Any,
) -> None:
    """Poison is what a record's content causes: a KeyError from a storage call (a bug, a bad
    deploy) fails the batch for Lambda to deliver again; once fixed, the redelivery is exact."""
    images = [image(f"p9#{i % 3}", "bug", NOW - i * MINUTE) for i in range(100)]
    records = [record(i) for i in images]

    def broken(**_: Any) -> None:
        raise KeyError("Attributes")

    aws.dynamodb.meta.events.register("before-call.dynamodb.UpdateItem", broken)
    try:
        with pytest.raises(KeyError):
            apply(aws.dynamodb, records)
    finally:
        aws.dynamodb.meta.events.unregister("before-call.dynamodb.UpdateItem", broken)
    assert quarantined(aws.dynamodb) == {}
    result = apply(aws.dynamodb, records)
    assert result.counted == 100 and result.quarantined == []
    assert_exact(aws.dynamodb, images)


def test_given_a_batch_over_every_write_shard_of_two_quarters_when_applied_then_one_audit_write_per_quarter(
    aws: Any,
) -> None:
    quarters = ("202611180815", "202611180830")
    images = [image(f"{quarters[i // 20]}#{i % 4}", "audq", NOW - i * MINUTE) for i in range(40)]
    records = [record(i) for i in images]
    calls: list[dict[str, Any]] = []

    apply(recording(aws.dynamodb, "update_item", calls), records)

    audit_writes = [c for c in calls if c["Key"]["pk"]["S"].startswith(keyspace.AUDIT_GROUP)]
    assert sorted(c["Key"]["pk"]["S"] for c in audit_writes) == [f"{keyspace.AUDIT_GROUP}{q}" for q in quarters]
    assert all(c["Key"]["sk"]["S"] == layout.shard_attribute(SHARD) for c in audit_writes)
    expected = {f"{q}#{w}": 5 for q in quarters for w in range(4)}
    assert {pk: audit(aws.dynamodb, pk)["applied"] for pk in expected} == expected

    # Delivered again, whole and cut differently (a bisected retry): the audit items add nothing.
    calls.clear()
    apply(recording(aws.dynamodb, "update_item", calls), records[7:26])
    apply(recording(aws.dynamodb, "update_item", calls), records)

    assert {pk: audit(aws.dynamodb, pk)["applied"] for pk in expected} == expected
    assert_exact(aws.dynamodb, images)


def test_given_the_handler_dies_between_two_quarters_audit_writes_when_delivered_again_then_each_counted_once(
    aws: Any,
) -> None:
    quarters = ("202611180845", "202611180900")
    images = [image(f"{quarters[i % 2]}#{i % 3}", "audd", NOW - i * MINUTE) for i in range(24)]
    records = [record(i) for i in images]

    def die_at_the_second_quarter(kwargs: dict[str, Any]) -> None:
        if kwargs["Key"]["pk"]["S"] == f"{keyspace.AUDIT_GROUP}{quarters[1]}":
            raise Killed

    with pytest.raises(Killed):
        apply(checking(aws.dynamodb, "update_item", die_at_the_second_quarter), records)
    assert sum(audit(aws.dynamodb, f"{quarters[0]}#{w}")["applied"] for w in range(3)) == 12
    assert sum(audit(aws.dynamodb, f"{quarters[1]}#{w}")["applied"] for w in range(3)) == 0

    apply(aws.dynamodb, records[:10])  # Lambda bisects the failed batch, then sends the rest
    apply(aws.dynamodb, records[10:])

    for q in quarters:
        assert [audit(aws.dynamodb, f"{q}#{w}")["applied"] for w in range(3)] == [4, 4, 4]
    assert_exact(aws.dynamodb, images)
