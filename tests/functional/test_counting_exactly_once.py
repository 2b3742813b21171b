"""Exactly-once windowed counting under Lambda's delivery rules, on moto.

Generated-id events are proven counted by a stream position per events partition, so these
tests deliver batches the ways Lambda may (again, cut differently, after a handler died
between or just after transactions, several shards at once on one hot counter) and compare
every bucket with the truth. One test breaks the order guarantee on purpose and shows that the
count then comes out wrong: that is the guarantee the design relies on.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeSerializer
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chalicelib.core import keyspace, timebuckets
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.settings import Settings
from chalicelib.counters import stream_apply as counting
from chalicelib.events.stream_records import from_lambda_event
from tests.functional.helpers import partition
from tests.functional.stream_fixtures import lambda_event, record

NOW = 1_795_000_000_000
MINUTE = 60_000
SETTINGS = Settings()
_serializer = TypeSerializer()
_names = itertools.count()


class Killed(BaseException):
    """The handler's process ends (timeout, crash): not an exception the handler can see."""


def image(
    partition: str,
    counter: str,
    t: int,
    *,
    client_id: str | None = None,
    retention: int = 7 * 86400,
    seq: int = 0,
) -> dict[str, Any]:
    plain = {
        "pk": partition,
        "sk": f"2026-11-18T08:26:40.000Z#{seq:08d}{next(_names)}",
        "kind": "event",
        "counter": counter,
        "id": client_id or f"gen-{next(_names)}",
        "id_given": client_id is not None,
        "time": t,
        "retention": retention,
    }
    return {k: _serializer.serialize(v) for k, v in plain.items()}


def apply(dynamodb: Any, records: list[dict[str, Any]], now: int = NOW) -> BatchResult:
    return counting.apply_stream_batch(dynamodb, SETTINGS, from_lambda_event(lambda_event(records)), now, lambda s: None)


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
        (counter, sk): int(item["n"]["N"])
        for counter in {c for c, _ in truth}
        for sk, item in stored_buckets(dynamodb, counter).items()
    }
    assert stored == truth


class Dying:
    """A client whose handler dies before (or right after) its n-th TransactWriteItems."""

    def __init__(self, real: Any, die_on: int, after: bool = False) -> None:
        self.real, self.die_on, self.after, self.calls = real, die_on, after, 0

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == self.die_on and not self.after:
            raise Killed
        response = self.real.transact_write_items(**kwargs)
        if self.calls == self.die_on:
            raise Killed  # committed, but the handler never reports success
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def hour_spread_images(partitions: list[str], counters: list[str], n: int) -> list[dict[str, Any]]:
    return [image(partitions[i % len(partitions)], counters[i % len(counters)], NOW - i * 7 * MINUTE) for i in range(n)]


def test_given_generated_ids_when_every_batch_delivered_twice_and_recut_then_exact(aws: Any) -> None:
    images = hour_spread_images(["p1#0", "p1#1", "p1#2"], ["a", "b"], 120)
    records = [record(i) for i in images]
    for start in range(0, len(records), 25):
        batch = records[start : start + 25]
        assert apply(aws.dynamodb, batch).counted == len(batch)
        again = apply(aws.dynamodb, batch)
        assert (again.counted, again.duplicates) == (0, len(batch))
    for start in range(0, len(records), 40):  # the whole stream again, cut differently
        assert apply(aws.dynamodb, records[start : start + 40]).counted == 0
    assert_exact(aws.dynamodb, images)


@pytest.mark.parametrize("after", [False, True], ids=["before-commit", "after-commit"])
@pytest.mark.parametrize("die_on", [1, 2, 3])
def test_given_handler_dies_between_transactions_when_batch_redelivered_then_exact(
    aws: Any, die_on: int, after: bool
) -> None:
    # 300 events over 55 hours, 4 counters: about 230 buckets, so the batch takes 3 transactions.
    images = [image(f"p2#{i % 2}", "cdef"[i % 4], NOW - i * 11 * MINUTE) for i in range(300)]
    records = [record(i) for i in images]
    dying = Dying(aws.dynamodb, die_on, after)
    with pytest.raises(Killed):
        apply(dying, records)
    result = apply(aws.dynamodb, records)
    assert result.counted + result.duplicates == len(records)
    assert result.duplicates > 0 or (die_on == 1 and not after)
    assert_exact(aws.dynamodb, images)


def test_given_batch_holding_whole_stream_prefix_when_partly_applied_then_positions_name_exactly_what_was(
    aws: Any,
) -> None:
    images = [image("p3#0", "e", NOW - i * MINUTE) for i in range(10)]
    records = [record(i) for i in images]
    apply(aws.dynamodb, records[:4])
    # Lambda retries from its checkpoint with a longer batch: the first four are known.
    result = apply(aws.dynamodb, records)
    assert (result.counted, result.duplicates) == (6, 4)
    assert result.transactions == 2  # cancelled once on the position, then the rest
    assert_exact(aws.dynamodb, images)


class ConflictingSometimes:
    """Like DynamoDB when another invocation writes the same bucket: every other transaction of
    each invocation is cancelled with TransactionConflict on its bucket items."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.conflicts = 0
        self.lock = threading.Lock()
        self.local = threading.local()

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.local.calls = getattr(self.local, "calls", 0) + 1
        conflict = self.local.calls % 2 == 1
        with self.lock:
            self.conflicts += conflict
        if conflict:
            reasons = [{"Code": "TransactionConflict" if "CTR#" in str(e) else "None"} for e in kwargs["TransactItems"]]
            raise ClientError(
                {"Error": {"Code": "TransactionCanceledException"}, "CancellationReasons": reasons},
                "TransactWriteItems",
            )
        return self.real.transact_write_items(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_given_shards_applied_concurrently_on_one_hot_counter_when_conflicting_then_exact(aws: Any) -> None:
    shards = {w: [image(f"p4#{w}", "hot", NOW - i * 1000) for i in range(60)] for w in range(4)}
    records = {w: [record(i) for i in imgs] for w, imgs in shards.items()}
    conflicting = ConflictingSometimes(aws.dynamodb)
    errors: list[BaseException] = []

    def run(shard: list[dict[str, Any]]) -> None:
        try:
            for start in range(0, len(shard), 15):
                batch = shard[start : start + 15]
                apply(conflicting, batch)
                apply(conflicting, batch)  # and again: at least once
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in records.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert conflicting.conflicts > 0
    assert_exact(aws.dynamodb, [i for imgs in shards.values() for i in imgs])


def test_given_partition_delivered_out_of_sequence_when_applied_then_count_is_short(aws: Any) -> None:
    """The guarantee relied on: a partition's records arrive in sequence order. Break it (a later
    batch of the partition first, as a second concurrent reader of one shard could) and the
    earlier records are taken for already counted: the count comes out short."""
    images = [image("p5#0", "order", NOW - i * MINUTE) for i in range(10)]
    records = [record(i) for i in images]
    apply(aws.dynamodb, records[5:])
    late = apply(aws.dynamodb, records[:5])
    assert late.duplicates == 5 and late.counted == 0
    with pytest.raises(AssertionError):
        assert_exact(aws.dynamodb, images)
    # Within one batch the handler can see it, and says so.
    mixed = [image("p5#2", "order3", NOW - i * MINUTE) for i in range(3)]
    shuffled = [record(i) for i in mixed]
    assert apply(aws.dynamodb, [shuffled[2], shuffled[0], shuffled[1]]).details["out_of_sequence"] == 2
    # The same records in sequence order, elsewhere: exact.
    again = [image("p5#1", "order2", NOW - i * MINUTE) for i in range(10)]
    ordered = [record(i) for i in again]
    apply(aws.dynamodb, ordered[:5])
    apply(aws.dynamodb, ordered[5:])
    assert_exact(aws.dynamodb, again)


def test_given_client_ids_retried_across_batches_and_partitions_when_applied_then_counted_once(aws: Any) -> None:
    first = image("p6#0", "orders", NOW - MINUTE, client_id="order-1")
    retried = dict(first, pk={"S": "p6#3"}, sk={"S": "2026-11-18T08:27:00.000Z#retry"})
    other = image("p6#1", "orders", NOW - 2 * MINUTE)
    apply(aws.dynamodb, [record(first), record(other)])
    result = apply(aws.dynamodb, [record(retried)])
    assert result.duplicates == 1
    assert_exact(aws.dynamodb, [first, other])


@st.composite
def deliveries(draw: Any) -> tuple[list[dict[str, Any]], list[tuple[int, int, int | None, bool, bool]]]:
    """Events over a few partitions (one stream shard each) and a schedule Lambda's rules allow:
    a shard's records in order from its checkpoint, in batches of any size; a batch may die
    before or right after any of its transactions; a checkpoint may fail to advance after a
    success (the batch comes again); shards interleave freely."""
    example = next(_names)
    shard_count = draw(st.integers(1, 3))
    n = draw(st.integers(1, 30))
    images = []
    for i in range(n):
        shard = draw(st.integers(0, shard_count - 1))
        counter = draw(st.sampled_from(["x", "y"]))
        t = NOW - draw(st.integers(0, 50 * 60)) * MINUTE
        if draw(st.integers(0, 3)) == 0:  # a client id; sometimes one the client sent before
            earlier = [
                img for img in images if img["id_given"]["BOOL"] and img["counter"]["S"] == f"{counter}{example}"
            ]
            if earlier and draw(st.booleans()):
                twin = draw(st.sampled_from(earlier))
                images.append(dict(twin, pk={"S": f"q{example}#{shard}"}, sk={"S": f"retry-{i}"}))
                continue
            images.append(image(f"q{example}#{shard}", f"{counter}{example}", t, client_id=f"id-{i}", seq=i))
        else:
            images.append(image(f"q{example}#{shard}", f"{counter}{example}", t, seq=i))
    schedule = draw(
        st.lists(
            st.tuples(
                st.integers(0, shard_count - 1),  # which shard's poller runs
                st.integers(1, 12),  # batch size
                st.one_of(st.none(), st.integers(1, 3)),  # dies on this transaction
                st.booleans(),  # ...after it committed
                st.booleans(),  # checkpoint saved after a success
            ),
            max_size=25,
        )
    )
    return images, schedule


def test_given_any_lambda_delivery_schedule_when_stream_drained_then_every_bucket_exact(aws: Any) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(deliveries())
    def check(case: tuple[list[dict[str, Any]], list[tuple[int, int, int | None, bool, bool]]]) -> None:
        images, schedule = case
        by_shard: dict[int, list[dict[str, Any]]] = {}
        for img in images:  # the stream: each record once, in write order, in its shard
            by_shard.setdefault(int(img["pk"]["S"].split("#")[1]), []).append(record(img))
        checkpoint = dict.fromkeys(by_shard, 0)
        for shard, size, die_on, after, saved in schedule:
            if shard not in by_shard:
                continue
            batch = by_shard[shard][checkpoint[shard] : checkpoint[shard] + size]
            if not batch:
                continue
            try:
                apply(aws.dynamodb if die_on is None else Dying(aws.dynamodb, die_on, after), batch)
            except Killed:
                continue  # Lambda delivers from the checkpoint again
            if saved:
                checkpoint[shard] += len(batch)
        for shard, records in by_shard.items():  # Lambda keeps going until each shard is done
            while checkpoint[shard] < len(records):
                batch = records[checkpoint[shard] : checkpoint[shard] + 7]
                apply(aws.dynamodb, batch)
                checkpoint[shard] += len(batch)
        assert_exact(aws.dynamodb, images)

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
        assert set(stored) == set(longest)
        for sk, item in stored.items():
            resolution = "hour" if sk.startswith("h") else "day"
            bucket = timebuckets.Bucket(resolution, int(sk.split("#")[1]))
            assert Decimal(item["expires_at"]["N"]) == bucket.end_ms // 1000 + longest[sk]
            assert Decimal(item["retention"]["N"]) == longest[sk]

    check()


# -- poison records: set aside alone on first delivery, the rest counted ---------------------------


class RejectsCounter:
    """DynamoDB refusing a transaction because of one record's data (here: any transaction that
    counts the counter `refused`), as it does for data moto accepts."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def transact_write_items(self, **kwargs: Any) -> Any:
        if "CTR#refused" in str(kwargs["TransactItems"]):
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "refused"}}, "TransactWriteItems")
        return self.real.transact_write_items(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_given_one_poison_record_of_each_kind_when_batch_delivered_then_good_counted_and_each_set_aside_once(
    aws: Any,
) -> None:
    good = [image(f"p7#{i % 2}", "mixed", NOW - i * MINUTE) for i in range(6)]
    undeserializable = image("p7#0", "mixed", NOW)
    undeserializable["time"] = {"N": "1e999999"}  # overflows the SDK's decimal context
    bad_counter = image("p7#0", "mixed", NOW)
    bad_counter["counter"] = {"S": "mi\udc00xed"}
    bad_id = image("p7#1", "mixed", NOW, client_id="order-\udc00x")
    no_key = image("p" * 2100, "mixed", NOW)  # its stream position's key would be too long
    refused = image("p7#1", "refused", NOW)
    poison = [undeserializable, bad_counter, bad_id, no_key, refused]
    records = [record(i) for i in [good[0], good[1], *poison[:3], good[2], good[3], *poison[3:], good[4], good[5]]]
    client = RejectsCounter(aws.dynamodb)

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
    assert "rejected" in stored[records[8]["eventID"]]

    again = apply(client, records)  # redelivered: nothing counted twice, nothing set aside twice
    assert again.counted == 0 and again.duplicates == len(good)
    assert_exact(aws.dynamodb, good)
    assert quarantined(aws.dynamodb) == stored


def quarantined(dynamodb: Any) -> dict[str, str]:
    return {i["sk"]["S"]: i["reason"]["S"] for i in partition(dynamodb, f"{keyspace.QUARANTINE}events-stream")}


def test_given_storage_unavailable_when_batch_applied_then_batch_fails_and_nothing_set_aside(aws: Any) -> None:
    class Unavailable:
        def transact_write_items(self, **kwargs: Any) -> Any:
            raise ClientError({"Error": {"Code": "ServiceUnavailable"}}, "TransactWriteItems")

        def __getattr__(self, name: str) -> Any:
            return getattr(aws.dynamodb, name)

    from chalicelib.core.errors import StorageError

    with pytest.raises(StorageError):
        apply(Unavailable(), [record(image("p8#0", "down", NOW))])
    assert quarantined(aws.dynamodb) == {}
