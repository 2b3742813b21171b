"""Replaying set-aside stream records after a fix, on moto: a record invalid when it arrived is
counted once when replayed after its stored copy is corrected, however often (or however
concurrently) the replay runs, and whether or not a replay died half-way; a record still
invalid stays set aside with the new reason; the audit still adds up."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeSerializer

from chalicelib.core import keyspace, timebuckets
from chalicelib.core.settings import Settings
from chalicelib.counters import audit, breakdowns, filters, layout, reads, replay, stream, summary_writes, topk
from chalicelib.events.stream_records import from_lambda_event
from tests.fakes import Dying, Forwarding, Killed, failing
from tests.functional.helpers import account, accounts, invoke, partition
from tests.functional.stream_fixtures import lambda_event, record

SETTINGS = Settings()
MINUTE = 60_000
_serialize = TypeSerializer().serialize
QUARANTINE = f"{keyspace.QUARANTINE}events-stream"


def event_image(clock: Any, counter: str, seq: int, time: Any, client_id: str | None = None) -> dict[str, Any]:
    """An events-table item as a stream image; `time` as given (a wrong type makes it poison)."""
    plain = {
        "pk": _quarter_pk(clock.now),
        "sk": f"2026-11-18T08:26:40.000Z#{seq:04d}",
        "kind": "event",
        "counter": counter,
        "id": client_id or f"gen-{seq}",
        "id_given": client_id is not None,
        "time": time,
        "retention": 90_000,
        "ingested_at": clock.now,
    }
    return {k: _serialize(v) for k, v in plain.items()}


def _quarter_pk(now_ms: int) -> str:
    return audit.partitions(now_ms - now_ms % audit.QUARTER_MS, 1)[0]


def stored(dynamodb: Any, item: dict[str, Any]) -> None:
    dynamodb.put_item(TableName=SETTINGS.events_table, Item=item)


def count_of(dynamodb: Any, counter: str) -> int:
    """The counter's day bucket (every event here falls on one UTC day)."""
    days = [i for i in partition(dynamodb, f"{keyspace.COUNTER}{counter}") if i["sk"]["S"].startswith("d#")]
    return sum(int(i["n"]["N"]) for i in days)


def quarantined(dynamodb: Any) -> dict[str, dict[str, Any]]:
    return {i["sk"]["S"]: i for i in partition(dynamodb, QUARANTINE)}


def tally(dynamodb: Any, pk: str) -> dict[str, int]:
    return accounts(dynamodb, pk)


def correct_time(dynamodb: Any, record_id: str, time_ms: int) -> None:
    """What an operator does with the stored copy: the time written as text becomes a number."""
    item = quarantined(dynamodb)[record_id]
    raw = json.loads(item["record"]["S"])
    raw["dynamodb"]["NewImage"]["time"] = {"N": str(time_ms)}
    rewrite(dynamodb, item, raw)


def rewrite(dynamodb: Any, item: dict[str, Any], raw: dict[str, Any]) -> None:
    """Store `raw` as the set-aside copy of the quarantine item `item`."""
    dynamodb.update_item(
        TableName=SETTINGS.counts_table,
        Key={"pk": item["pk"], "sk": item["sk"]},
        UpdateExpression="SET #r = :r",
        ExpressionAttributeNames={"#r": "record"},
        ExpressionAttributeValues={":r": {"S": json.dumps(raw)}},
    )


def poisoned(client: Any, aws: Any, clock: Any, client_id: str | None = None) -> tuple[str, str, str]:
    """A good event and one whose time another writer stored as text go through the stream
    handler; the handler writes the partition's audit item. Returns (poison's record id,
    the good record's id, the partition)."""
    good = event_image(clock, "replayed", 1, clock.now - MINUTE)
    bad = event_image(clock, "replayed", 2, str(clock.now - 2 * MINUTE), client_id)
    for item in (good, bad):
        stored(aws.dynamodb, item)
    records = [record(good), record(bad)]
    result = invoke(client, "on_event_records", lambda_event(records))["state"]
    assert (result["counted"], result["quarantined"]) == (1, 1)
    pk = good["pk"]["S"]
    return records[1]["eventID"], records[0]["eventID"], pk


def post_replay(client: Any, body: Any) -> Any:
    return client.http.post("/quarantine/replay", headers={"Content-Type": "application/json"}, body=json.dumps(body))


def test_given_a_record_set_aside_when_replayed_before_and_after_its_fix_then_counted_once(
    client: Any, aws: Any, clock: Any
) -> None:
    bad_id, _, pk = poisoned(client, aws, clock)
    assert count_of(aws.dynamodb, "replayed") == 1

    unfixed = post_replay(client, {"source": "events-stream", "ids": [bad_id]})

    assert unfixed.status_code == 200, unfixed.body
    assert [b["id"] for b in unfixed.json_body["still_bad"]] == [bad_id]
    assert "time" in quarantined(aws.dynamodb)[bad_id]["reason"]["S"]
    assert count_of(aws.dynamodb, "replayed") == 1

    correct_time(aws.dynamodb, bad_id, clock.now - 2 * MINUTE)
    fixed = post_replay(client, {"source": "events-stream", "ids": [bad_id]}).json_body
    twice = post_replay(client, {"source": "events-stream", "ids": [bad_id]}).json_body
    everything = post_replay(client, {"source": "events-stream", "limit": 100}).json_body

    assert fixed["replayed"] == [bad_id]
    assert twice["not_found"] == [bad_id] and twice["replayed"] == []
    assert everything["replayed"] == []
    assert count_of(aws.dynamodb, "replayed") == 2
    assert minutes_of(aws.dynamodb, f"{keyspace.COUNTER}replayed") == 2
    assert quarantined(aws.dynamodb) == {}
    assert tally(aws.dynamodb, pk) == {"applied": 2, "set_aside": 0, "expired": 0, "duplicates": 0, "repaired": 0}


def test_given_a_record_still_invalid_when_replayed_then_it_stays_with_the_new_reason(
    client: Any, aws: Any, clock: Any
) -> None:
    bad_id, _, pk = poisoned(client, aws, clock)
    item = quarantined(aws.dynamodb)[bad_id]
    raw = json.loads(item["record"]["S"])
    raw["dynamodb"]["NewImage"]["time"] = {"N": str(clock.now)}
    raw["dynamodb"]["NewImage"]["counter"] = {"S": "not a name"}  # a fix that made it worse
    rewrite(aws.dynamodb, item, raw)

    answer = post_replay(client, {"source": "events-stream", "limit": 10}).json_body

    assert [b["id"] for b in answer["still_bad"]] == [bad_id] and answer["replayed"] == []
    assert "counter" in quarantined(aws.dynamodb)[bad_id]["reason"]["S"]
    assert count_of(aws.dynamodb, "replayed") == 1
    assert tally(aws.dynamodb, pk)["set_aside"] == 1


class ReplayedMeanwhile(Forwarding):
    """Another replay of the same record commits just before this one's transaction."""

    def __init__(self, real: Any, now_ms: int) -> None:
        super().__init__(real)
        self.now_ms = now_ms
        self.other: Any = None

    def transact_write_items(self, **kwargs: Any) -> Any:
        if self.other is None:
            self.other = replay.replay(self.real, SETTINGS, replay.ReplayRequest(limit=10), self.now_ms)
        return self.real.transact_write_items(**kwargs)


def test_given_two_replays_at_once_when_both_read_the_record_then_it_is_counted_once(
    client: Any, aws: Any, clock: Any
) -> None:
    bad_id, _, pk = poisoned(client, aws, clock)
    correct_time(aws.dynamodb, bad_id, clock.now - 2 * MINUTE)
    racing = ReplayedMeanwhile(aws.dynamodb, clock.now)

    late = replay.replay(racing, SETTINGS, replay.ReplayRequest(ids=(bad_id,)), clock.now)

    assert racing.other.replayed == [bad_id]
    assert late.replayed == [] and late.not_found == [bad_id]
    assert count_of(aws.dynamodb, "replayed") == 2
    assert tally(aws.dynamodb, pk)["set_aside"] == 0


@pytest.mark.parametrize("after", [False, True], ids=["before-commit", "after-commit"])
def test_given_a_replay_dying_half_way_when_retried_then_counted_once(
    client: Any, aws: Any, clock: Any, after: bool
) -> None:
    bad_id, _, pk = poisoned(client, aws, clock)
    correct_time(aws.dynamodb, bad_id, clock.now - 2 * MINUTE)

    with pytest.raises(Killed):
        replay.replay(
            Dying(aws.dynamodb, 1, after, methods=("transact_write_items",)),
            SETTINGS,
            replay.ReplayRequest(ids=(bad_id,)),
            clock.now,
        )
    retried = post_replay(client, {"source": "events-stream", "ids": [bad_id]}).json_body

    assert retried["replayed" if not after else "not_found"] == [bad_id]
    assert count_of(aws.dynamodb, "replayed") == 2
    assert tally(aws.dynamodb, pk) == {"applied": 2, "set_aside": 0, "expired": 0, "duplicates": 0, "repaired": 0}


def test_given_a_client_id_counted_through_another_copy_when_replayed_then_only_taken_off(
    client: Any, aws: Any, clock: Any
) -> None:
    bad_id, _, pk = poisoned(client, aws, clock, client_id="order-9")
    retry = event_image(clock, "replayed", 3, clock.now - 2 * MINUTE, "order-9")  # the client's retry, valid
    stored(aws.dynamodb, retry)
    invoke(client, "on_event_records", lambda_event([record(retry)]))
    account(aws.dynamodb, pk, clock.now, applied=1)
    correct_time(aws.dynamodb, bad_id, clock.now - 2 * MINUTE)

    answer = post_replay(client, {"source": "events-stream", "ids": [bad_id]}).json_body

    assert answer["already_counted"] == [bad_id]
    assert count_of(aws.dynamodb, "replayed") == 2  # the good event and order-9 once
    assert quarantined(aws.dynamodb) == {}
    assert tally(aws.dynamodb, pk)["set_aside"] == 0


def test_given_a_client_id_record_refused_after_claiming_its_marker_when_replayed_then_counted_once(
    client: Any, aws: Any, clock: Any
) -> None:
    """The stream handler claims a client id's marker before its bucket writes; DynamoDB then
    refuses the writes for the record's data, so the record is set aside holding the claim. The
    marker names this very record: replay counts it (once), it was not counted elsewhere."""
    good = event_image(clock, "replayed", 1, clock.now - MINUTE)
    claimed = event_image(clock, "refused", 2, clock.now - 2 * MINUTE, "order-7")
    for item in (good, claimed):
        stored(aws.dynamodb, item)
    records = [record(good), record(claimed)]
    refusing = failing(aws.dynamodb, "update_item", "ValidationException", lambda kw: "CTR#refused" in str(kw["Key"]))
    result = stream.apply_stream_batch(refusing, SETTINGS, from_lambda_event(lambda_event(records)), clock.now)
    assert (result.counted, len(result.quarantined)) == (1, 1)
    set_aside = records[1]["eventID"]
    assert set(quarantined(aws.dynamodb)) == {set_aside}
    marker = layout.marker_key("refused", "order-7")
    assert "Item" in aws.dynamodb.get_item(TableName=SETTINGS.counts_table, Key=marker)  # claimed by the record
    assert count_of(aws.dynamodb, "refused") == 0
    pk = good["pk"]["S"]

    answer = post_replay(client, {"source": "events-stream", "ids": [set_aside]}).json_body
    again = post_replay(client, {"source": "events-stream", "ids": [set_aside]}).json_body

    assert answer["replayed"] == [set_aside] and answer["already_counted"] == []
    assert again["not_found"] == [set_aside]
    assert count_of(aws.dynamodb, "refused") == 1
    assert tally(aws.dynamodb, pk) == {"applied": 2, "set_aside": 0, "expired": 0, "duplicates": 0, "repaired": 0}
    # The client's retry of order-7 (another copy) is still a duplicate: the marker holds.
    retry = event_image(clock, "refused", 3, clock.now - 2 * MINUTE, "order-7")
    stored(aws.dynamodb, retry)
    invoke(client, "on_event_records", lambda_event([record(retry)]))
    assert count_of(aws.dynamodb, "refused") == 1


def test_given_a_set_aside_copy_without_its_shard_when_replayed_then_it_stays_and_no_marker_is_put(
    client: Any, aws: Any, clock: Any
) -> None:
    """A client id's marker always names the record that claimed it (shard and position): a copy
    that no longer says which shard it came through cannot claim one, so it is not counted."""
    bad_id, _, pk = poisoned(client, aws, clock, client_id="order-5")
    correct_time(aws.dynamodb, bad_id, clock.now - 2 * MINUTE)
    item = quarantined(aws.dynamodb)[bad_id]
    raw = json.loads(item["record"]["S"])
    del raw["shardId"]
    rewrite(aws.dynamodb, item, raw)

    answer = post_replay(client, {"source": "events-stream", "ids": [bad_id]}).json_body

    assert answer["still_bad"] == [{"id": bad_id, "reason": "the stored record names no stream shard"}]
    assert set(quarantined(aws.dynamodb)) == {bad_id}
    marker = layout.marker_key("replayed", "order-5")
    assert "Item" not in aws.dynamodb.get_item(TableName=SETTINGS.counts_table, Key=marker)
    assert count_of(aws.dynamodb, "replayed") == 1
    assert tally(aws.dynamodb, pk)["set_aside"] == 1


def minutes_of(dynamodb: Any, pk: str) -> int:
    """The minute counts of one counter (or filter) partition: in its hour items, or inline in
    its day items."""
    items = partition(dynamodb, pk)
    hours = [i for i in items if i["sk"]["S"].startswith("h#")]
    inline = sum(sum(layout.inline_minutes(i).values()) for i in items if i["sk"]["S"].startswith("d#"))
    return inline + sum(int(v["N"]) for i in hours for k, v in i.items() if k[0] == "m" and k[1:].isdigit())


def test_given_a_record_refused_by_one_bucket_after_another_took_it_when_replayed_then_each_bucket_counts_it_once(
    client: Any, aws: Any, clock: Any
) -> None:
    """DynamoDB takes a record's day bucket, then refuses its hour bucket: the record is set
    aside while its day already holds it. Replay adds it to the hour only. (The day's inline
    room is used up, so the event's minute goes to its hour item.)"""
    good = event_image(clock, "replayed", 1, clock.now - MINUTE)
    split = event_image(clock, "split", 2, clock.now - 2 * MINUTE)
    for item in (good, split):
        stored(aws.dynamodb, item)
    day = timebuckets.buckets_for(clock.now - 2 * MINUTE)[1]
    aws.dynamodb.put_item(
        TableName=SETTINGS.counts_table,
        Item={
            "pk": {"S": f"{keyspace.COUNTER}split"},
            "sk": {"S": f"d#{day.index:010d}"},
            "n": {"N": str(layout.INLINE_MAX)},
            layout.INLINE_COUNT: {"N": str(layout.INLINE_MAX)},
            layout.inline_attribute(0): {"N": str(layout.INLINE_MAX)},
            "retention": {"N": "90000"},
            "expires_at": {"N": "9999999999"},
        },
    )
    records = [record(good), record(split)]
    refusing = failing(
        aws.dynamodb,
        "update_item",
        "ValidationException",
        lambda kw: kw["Key"]["pk"]["S"] == f"{keyspace.COUNTER}split" and kw["Key"]["sk"]["S"].startswith("h#"),
    )
    result = stream.apply_stream_batch(refusing, SETTINGS, from_lambda_event(lambda_event(records)), clock.now)
    assert (result.counted, len(result.quarantined)) == (1, 1)
    set_aside = records[1]["eventID"]
    full = layout.INLINE_MAX
    assert count_of(aws.dynamodb, "split") == full + 1  # the day took it
    assert minutes_of(aws.dynamodb, f"{keyspace.COUNTER}split") == full  # the hour refused it

    answer = post_replay(client, {"source": "events-stream", "ids": [set_aside]}).json_body
    again = post_replay(client, {"source": "events-stream", "ids": [set_aside]}).json_body

    assert answer["replayed"] == [set_aside]
    assert again["not_found"] == [set_aside]
    assert count_of(aws.dynamodb, "split") == full + 1
    assert minutes_of(aws.dynamodb, f"{keyspace.COUNTER}split") == full + 1
    assert tally(aws.dynamodb, good["pk"]["S"])["set_aside"] == 0


def test_given_a_record_held_inline_by_its_day_then_refused_by_a_filter_when_replayed_then_only_the_filter_counts_it(
    client: Any, aws: Any, clock: Any
) -> None:
    """The counter's day takes the event inline (its hour is never written), then DynamoDB
    refuses the filter's bucket: the set-aside copy names the day and the hour as holding it,
    so replay counts it in the filter's buckets only."""
    event = event_image(clock, "inline", 1, clock.now - MINUTE)
    event["dimensions"] = _serialize({"region": "eu"})
    stored(aws.dynamodb, event)
    flt = filters.filter_pk("inline", {"region": "eu"})
    refusing = failing(aws.dynamodb, "update_item", "ValidationException", lambda kw: kw["Key"]["pk"]["S"] == flt)
    result = stream.apply_stream_batch(refusing, SETTINGS, from_lambda_event(lambda_event([record(event)])), clock.now)
    assert len(result.quarantined) == 1
    assert (count_of(aws.dynamodb, "inline"), minutes_of(aws.dynamodb, f"{keyspace.COUNTER}inline")) == (1, 1)

    answer = post_replay(client, {"source": "events-stream", "ids": result.quarantined}).json_body

    assert answer["replayed"] == result.quarantined
    assert (count_of(aws.dynamodb, "inline"), minutes_of(aws.dynamodb, f"{keyspace.COUNTER}inline")) == (1, 1)
    days = [i for i in partition(aws.dynamodb, flt) if i["sk"]["S"].startswith("d#")]
    assert sum(int(i["n"]["N"]) for i in days) == 1 and minutes_of(aws.dynamodb, flt) == 1


def test_given_a_replayed_partition_when_audited_then_it_adds_up(client: Any, aws: Any, clock: Any) -> None:
    first = client.http.post("/audit", headers={"Content-Type": "application/json"}, body="{}").json_body
    assert first["audited"] == 0  # the first run only sets the checkpoint
    bad_id, _, _ = poisoned(client, aws, clock)
    correct_time(aws.dynamodb, bad_id, clock.now - 2 * MINUTE)
    post_replay(client, {"source": "events-stream", "ids": [bad_id]})
    clock.now = audit.settled_before(clock.now, 0) + audit.QUARTER_MS + (SETTINGS.audit_settle_minutes + 1) * MINUTE

    found = client.http.post("/audit", headers={"Content-Type": "application/json"}, body="{}").json_body

    assert found["audited"] > 0 and found["short"] == []


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"source": "uniques-queue", "limit": 5},
        {"source": "events-stream", "ids": []},
        {"source": "events-stream", "ids": [3]},
        {"source": "events-stream", "ids": ["a"], "limit": 2},
        {"source": "events-stream", "limit": 0},
        {"source": "events-stream", "limit": 101},
        {"source": "events-stream", "other": 1},
        [],
    ],
)
def test_given_a_bad_replay_body_when_posted_then_400(client: Any, body: Any) -> None:
    answer = post_replay(client, body)
    assert answer.status_code == 400, answer.body
    assert answer.json_body["Code"] == "BadRequestError"


class SummaryRewrittenMeanwhile(Forwarding):
    """A client on which the stream handler rewrites the record's hour summary (one more event
    of the counter) just before the replay's first transaction: the transaction's condition on
    the version read fails, and the replay must read the summary again, losing neither event."""

    def __init__(self, real: Any, write: Any) -> None:
        super().__init__(real)
        self.write, self.done = write, False

    def transact_write_items(self, **kwargs: Any) -> Any:
        if not self.done:
            self.done = True
            self.write()
        return self.real.transact_write_items(**kwargs)


@pytest.mark.parametrize("single_bytes", [summary_writes.SINGLE_BYTES, 60], ids=["kept-whole", "split"])
def test_given_a_record_with_dimensions_set_aside_when_replayed_then_its_filters_and_breakdown_count_it_once(
    client: Any, aws: Any, clock: Any, monkeypatch: Any, single_bytes: int
) -> None:
    monkeypatch.setattr(summary_writes, "SINGLE_BYTES", single_bytes)  # 60 bytes: split at the second value

    def with_dimensions(seq: int, time: Any, provider: str) -> dict[str, Any]:
        item = event_image(clock, "sliced", seq, time)
        item["dimensions"] = _serialize({"provider": provider, "region": "eu"})
        item["values"] = _serialize({"amount": Decimal("1.25")})
        return item

    images = [with_dimensions(1, clock.now - MINUTE, "p1"), with_dimensions(2, str(clock.now - MINUTE), "p2")]
    images += [with_dimensions(3 + i, clock.now - MINUTE, f"p{3 + i}") for i in range(3)]
    stream.apply_stream_batch(
        aws.dynamodb, SETTINGS, from_lambda_event(lambda_event([record(i) for i in images])), clock.now
    )
    (bad_id,) = quarantined(aws.dynamodb)
    correct_time(aws.dynamodb, bad_id, clock.now - MINUTE)
    late = with_dimensions(9, clock.now - MINUTE, "p2")

    def stream_meanwhile() -> None:
        batch = lambda_event([record(late)], "shard-late")
        stream.apply_stream_batch(aws.dynamodb, SETTINGS, from_lambda_event(batch), clock.now)

    racing = SummaryRewrittenMeanwhile(aws.dynamodb, stream_meanwhile)
    first = replay.replay(racing, SETTINGS, replay.ReplayRequest(ids=(bad_id,)), clock.now)
    again = replay.replay(aws.dynamodb, SETTINGS, replay.ReplayRequest(ids=(bad_id,)), clock.now)

    assert first.replayed == [bad_id] and again.not_found == [bad_id]
    last = clock.now // MINUTE
    for first_minute in (last - 30, last - 3 * 1440):  # a partial hour, and whole hours and a day
        answer = breakdowns.breakdown(
            aws.dynamodb, SETTINGS, "sliced", "provider", first_minute, last, 10, {}, clock.now
        )
        assert answer["exact"] is True
        assert [(v["value"], v["count"]) for v in answer["values"]] == [
            ("p2", 2),
            ("p1", 1),
            ("p3", 1),
            ("p4", 1),
            ("p5", 1),
        ]
        assert answer["values"][0]["sums"] == {"amount": Decimal("2.50")}
        assert answer["others"]["count"] == 0
        pair = reads.count_window(
            aws.dynamodb, SETTINGS, "sliced", first_minute, last, clock.now, where={"provider": "p2", "region": "eu"}
        )
        assert pair.count == 2


def test_given_a_replay_that_overfills_a_whole_summary_when_the_stream_splits_it_then_bounds_still_hold(
    client: Any, aws: Any, clock: Any, monkeypatch: Any
) -> None:
    """A replay merges into a summary kept whole without splitting it: if that overfills it, it
    evicts (a floor). The stream handler's split afterwards keeps that floor in every part and
    quarter hour, so the breakdown says `exact: false` with a bound that holds."""
    monkeypatch.setattr(summary_writes, "SINGLE_BYTES", 100_000)

    def with_provider(seq: int, time: Any, provider: str) -> dict[str, Any]:
        item = event_image(clock, "overfilled", seq, time)
        item["dimensions"] = _serialize({"provider": provider})
        return item

    t = clock.now - MINUTE
    images = [with_provider(i, t, f"value-{i:02d}-" + "x" * 40) for i in range(30)]
    images.append(with_provider(99, str(t), "late-" + "y" * 40))  # set aside: its time is text
    stream.apply_stream_batch(
        aws.dynamodb, SETTINGS, from_lambda_event(lambda_event([record(i) for i in images])), clock.now
    )
    (bad_id,) = quarantined(aws.dynamodb)
    correct_time(aws.dynamodb, bad_id, t)
    monkeypatch.setattr(topk, "MAX_BYTES", 1_200)  # the whole summary no longer fits: the replay evicts
    assert replay.replay(aws.dynamodb, SETTINGS, replay.ReplayRequest(ids=(bad_id,)), clock.now).replayed == [bad_id]
    heavy = [with_provider(200 + i, t, "value-00-" + "x" * 40) for i in range(3)]
    stream.apply_stream_batch(  # the next write splits it
        aws.dynamodb, SETTINGS, from_lambda_event(lambda_event([record(i) for i in heavy], "shard-2")), clock.now
    )

    hour_items = [
        i for i in partition(aws.dynamodb, f"{keyspace.SUMMARY}overfilled#provider") if i["sk"]["S"][0] in "hq"
    ]
    assert hour_items and all(
        topk.decode(i["e"]["S"]).floor >= 1 for i in hour_items
    )  # the floor went with every piece
    last = clock.now // MINUTE
    for first in (last - 5, last - 3 * 1440):  # a partial hour (quarter hours), whole hours and a day
        answer = breakdowns.breakdown(aws.dynamodb, SETTINGS, "overfilled", "provider", first, last, 1, {}, clock.now)
        assert answer["exact"] is False
        assert [(v["value"], v["count"]) for v in answer["values"]] == [("value-00-" + "x" * 40, 4)]
        assert answer["bound"] >= 1  # every value not listed had one event
        assert answer["others"]["count"] == 34 - 4
