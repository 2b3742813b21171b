"""Packed ingest on moto: a request's events stored as one item (events/packs.py), counted,
reported, audited, repaired and replayed event by event, next to items of the one-event layout.

Each event of a pack has its own position (record position, then its index in the pack), so a
redelivered pack counts nothing twice, a handler dying part-way through a pack resumes at
exactly the first event not applied, and a poison event is set aside alone while the good
events of its pack are counted."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from chalicelib.core import keyspace, timebuckets
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.settings import Settings
from chalicelib.counters import audit, repair, replay, stream
from chalicelib.events import ingest, packs
from chalicelib.events.stream_records import from_lambda_event
from tests.fakes import Dying, Killed, failing, unprocessed_writes
from tests.functional.helpers import (
    REPORT_SETTLE,
    accounts,
    all_reports,
    bucket_counts,
    invoke,
    partition,
    post_events,
    post_json,
    run_now,
    settle,
    start_audit,
)
from tests.functional.stream_fixtures import carried, lambda_event, record, stored_event_records

NOW = 1_795_000_000_000
MINUTE = 60_000
SETTINGS = Settings()
_serialize = TypeSerializer().serialize
_deserialize = TypeDeserializer().deserialize
QUARANTINE = f"{keyspace.QUARANTINE}events-stream"


def pack_image(events: list[ingest.Event], pk: str, ingest_ms: int = NOW) -> dict[str, Any]:
    """The stored item (DynamoDB JSON) of one request's events under `pk`: a pack, or the
    one-event layout for a single event."""
    items = [ingest.to_item(e, ingest_ms, SETTINGS) for e in events]
    sk = items[0]["sk"]
    item = packs.pack([{**i, "pk": pk, "sk": sk} for i in items])
    return {k: _serialize(v) for k, v in item.items()}


def event(counter: str, t: int, *, client_id: str | None = None, retention: int = 7 * 86400) -> ingest.Event:
    generated = f"gen-{counter}-{t}-{retention}"
    return ingest.Event(counter, client_id or generated, t, retention, {}, id_given=client_id is not None)


def apply(dynamodb: Any, records: list[dict[str, Any]], now: int = NOW) -> BatchResult:
    return stream.apply_stream_batch(dynamodb, SETTINGS, from_lambda_event(lambda_event(records)), now)


def truth(events: list[ingest.Event]) -> dict[tuple[str, str], int]:
    """Per (counter, bucket sort key) the distinct events (a client id counts once)."""
    seen: set[tuple[str, str]] = set()
    counts: Counter[tuple[str, str]] = Counter()
    for e in events:
        if e.id_given and (e.counter, e.id) in seen:
            continue
        seen.add((e.counter, e.id))
        for bucket in timebuckets.buckets_for(e.time_ms):
            counts[(e.counter, f"{bucket.resolution[0]}#{bucket.index:010d}")] += 1
    return dict(counts)


def stored_counts(dynamodb: Any, counters: set[str]) -> dict[tuple[str, str], int]:
    return {
        (c, sk): n for c in counters for sk, n in bucket_counts(partition(dynamodb, f"{keyspace.COUNTER}{c}")).items()
    }


def quarantined(dynamodb: Any) -> dict[str, dict[str, Any]]:
    return {i["sk"]["S"]: i for i in partition(dynamodb, QUARANTINE)}


def spread(counter: str, n: int, step_minutes: int, start: int = NOW) -> list[ingest.Event]:
    return [event(counter, start - i * step_minutes * MINUTE) for i in range(n)]


# -- the stream handler -------------------------------------------------------------------------


def test_given_poison_inside_a_pack_when_delivered_then_good_events_counted_it_alone_set_aside_and_replayable(
    aws: Any,
) -> None:
    events = spread("packed", 6, 3)
    poison = event("bad name!", NOW - MINUTE)
    image = pack_image([*events[:3], poison, *events[3:]], "P1#0")
    records = [record(image)]

    result = apply(aws.dynamodb, records)

    assert (result.counted, len(result.quarantined)) == (6, 1)
    set_aside = f"{records[0]['eventID']}#3"
    assert result.quarantined == [set_aside]
    assert stored_counts(aws.dynamodb, {"packed"}) == truth(events)
    assert accounts(aws.dynamodb, "P1#0")["applied"] == 6 and accounts(aws.dynamodb, "P1#0")["set_aside"] == 1
    # What the set-aside event keeps is its record narrowed to it: one event, its index.
    copy = json.loads(quarantined(aws.dynamodb)[set_aside]["record"]["S"])["dynamodb"]["NewImage"]
    assert (copy["n"], copy["o"], len(copy["e"]["L"])) == ({"N": "1"}, {"N": "3"}, 1)
    assert "counter" in quarantined(aws.dynamodb)[set_aside]["reason"]["S"]

    again = apply(aws.dynamodb, records)  # redelivered: nothing twice, nothing set aside twice
    assert (again.counted, again.duplicates) == (0, 6)
    assert stored_counts(aws.dynamodb, {"packed"}) == truth(events)
    assert list(quarantined(aws.dynamodb)) == [set_aside]
    assert accounts(aws.dynamodb, "P1#0")["applied"] == 6 and accounts(aws.dynamodb, "P1#0")["set_aside"] == 1

    # An operator corrects the stored copy; the replay counts that one event, once.
    item = quarantined(aws.dynamodb)[set_aside]
    raw = json.loads(item["record"]["S"])
    raw["dynamodb"]["NewImage"]["e"]["L"][0]["M"]["c"] = {"S": "packed"}
    aws.dynamodb.put_item(TableName=SETTINGS.counts_table, Item={**item, "record": {"S": json.dumps(raw)}})
    done = replay.replay(aws.dynamodb, SETTINGS, replay.ReplayRequest(ids=(set_aside,)), NOW)
    twice = replay.replay(aws.dynamodb, SETTINGS, replay.ReplayRequest(ids=(set_aside,)), NOW)
    assert done.replayed == [set_aside] and twice.not_found == [set_aside]
    fixed = event("packed", poison.time_ms)
    assert stored_counts(aws.dynamodb, {"packed"}) == truth([*events, fixed])
    assert accounts(aws.dynamodb, "P1#0")["applied"] == 7 and accounts(aws.dynamodb, "P1#0")["set_aside"] == 0


def test_given_packs_and_one_event_items_when_redelivered_whole_and_recut_then_each_event_counted_once(
    aws: Any,
) -> None:
    requests = [spread("ab"[r % 2], 25, 7, NOW - r * 11 * MINUTE) for r in range(4)]
    requests.insert(2, [event("a", NOW - 5 * MINUTE)])  # an item of the one-event layout between packs
    requests.append([event("b", NOW - 9 * MINUTE)])
    records = [record(pack_image(r, f"P2#{k % 2}")) for k, r in enumerate(requests)]
    every = [e for r in requests for e in r]

    counted = 0
    for batch in (records[:3], records[3:]):
        counted += apply(aws.dynamodb, batch).counted
        again = apply(aws.dynamodb, batch)  # as Lambda redelivers: before anything later
        assert (again.counted, again.duplicates, again.details["redelivered"]) == (0, carried(batch), carried(batch))
    assert counted == len(every) == carried(records)
    for cut in (records, records[1:4], records[4:], records[:2]):  # the stream again, cut differently
        assert apply(aws.dynamodb, cut).counted == 0
    assert stored_counts(aws.dynamodb, {"a", "b"}) == truth(every)
    assert accounts(aws.dynamodb, "P2#0")["applied"] + accounts(aws.dynamodb, "P2#1")["applied"] == len(every)


@pytest.mark.parametrize("after", [False, True], ids=["before-write", "after-write"])
@pytest.mark.parametrize("die_on", [1, 2, 7, 17, 20, 30, 40])
def test_given_handler_dies_part_way_through_a_pack_when_redelivered_then_it_resumes_exactly(
    aws: Any, die_on: int, after: bool
) -> None:
    # Two packs of 25 events over 50 hours, 2 counters, every third event with a client id (a claim
    # first): 6 day items holding their first 8 minutes inline and about 20 hour items, one
    # UpdateItem each, and 17 claims.
    requests = [
        [
            event("cd"[i % 2], NOW - (r * 25 + i) * 60 * MINUTE, client_id=f"o-{r}-{i}" if i % 3 == 0 else None)
            for i in range(25)
        ]
        for r in range(2)
    ]
    records = [record(pack_image(r, "P3#0")) for r in requests]
    every = [e for r in requests for e in r]
    dying = Dying(aws.dynamodb, die_on, after)

    with pytest.raises(Killed):
        apply(dying, records)
    result = apply(aws.dynamodb, records)

    assert result.counted + result.duplicates == len(every)
    assert result.details["out_of_sequence"] == 0
    assert stored_counts(aws.dynamodb, {"c", "d"}) == truth(every)
    assert accounts(aws.dynamodb, "P3#0")["applied"] == len(every)


def test_given_a_pack_with_client_ids_and_mixed_retentions_then_each_id_counted_once_and_buckets_keep_the_longest(
    aws: Any,
) -> None:
    t = NOW - 2 * MINUTE
    first = [
        event("orders", t, client_id="o-1", retention=3600),
        event("orders", t, client_id="o-1", retention=3600),  # the same id twice in one pack
        event("orders", t + 1, client_id="o-2", retention=30 * 86400),
        event("orders", t + 2, retention=86400),
        event("orders", t + 3, retention=3600),
    ]
    retried = [event("orders", t, client_id="o-2", retention=30 * 86400), event("orders", t + 4, client_id="o-3")]
    records = [record(pack_image(first, "P4#0")), record(pack_image(retried, "P4#1", NOW + 1000))]

    result = apply(aws.dynamodb, records)
    again = apply(aws.dynamodb, records)

    assert result.counted == 5 and result.duplicates == 2  # o-1 and o-2 a second time
    assert (again.counted, again.duplicates) == (0, 7)
    assert stored_counts(aws.dynamodb, {"orders"}) == truth([*first, *retried])
    day = timebuckets.buckets_for(t)[1]
    (bucket,) = partition(aws.dynamodb, f"{keyspace.COUNTER}orders")  # the day, its minutes inline
    assert bucket["sk"]["S"] == f"d#{day.index:010d}"
    assert int(bucket["retention"]["N"]) == 30 * 86400
    assert int(bucket["expires_at"]["N"]) == timebuckets.expires_at_s(day, 30 * 86400)
    tallies = (accounts(aws.dynamodb, "P4#0"), accounts(aws.dynamodb, "P4#1"))
    assert [(a["applied"], a["duplicates"]) for a in tallies] == [(4, 1), (1, 1)]


def test_given_events_of_one_request_with_retentions_then_each_reads_back_with_its_own(aws: Any) -> None:
    events = [event("r", NOW, retention=r) for r in (60, 3600, 86400)]
    image = pack_image(events, "P5#0")
    one = {k: _deserialize(v) for k, v in image.items()}
    back = [ingest.from_item(e) for e in packs.events_in(one)]
    assert [e.retention_seconds for e in back] == [60, 3600, 86400]
    assert one["expires_at"] == max(ingest.to_item(e, NOW, SETTINGS)["expires_at"] for e in events)


# -- through the API: storing, reports, the audit and its repair ---------------------------------


def test_given_a_pack_left_unprocessed_when_posted_then_503_names_its_events_and_the_others_are_stored(
    client: Any, app_module: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packs, "PACK_MAX_BYTES", 600)  # packs of a few events each
    monkeypatch.setattr(app_module.aws, "dynamodb", unprocessed_writes(aws.dynamodb, stuck=1, times=100), raising=False)
    body = {"events": [{"counter": "jobs", "id": f"e{i:02d}", "attributes": {"n": "x" * 80}} for i in range(10)]}
    response = client.http.post("/events", headers={"Content-Type": "application/json"}, body=json.dumps(body))
    assert response.status_code == 503
    failed, stored = response.json_body["failed"], response.json_body["stored"]
    assert 1 < len(failed) < 10
    assert sorted(failed + stored) == [f"e{i:02d}" for i in range(10)]
    items = [
        {k: _deserialize(v) for k, v in i.items()} for i in aws.dynamodb.scan(TableName=SETTINGS.events_table)["Items"]
    ]
    assert len(items) > 1
    assert sorted(str(e["id"]) for i in items for e in packs.events_in(i)) == sorted(stored)
    assert failed == [f"e{i:02d}" for i in range(10 - len(failed), 10)]  # the last pack, whole


def test_given_packs_and_single_events_when_reported_then_every_event_in_one_report_once(
    client: Any, aws: Any, clock: Any
) -> None:
    post_events(client, [{"counter": f"e{n}", "attributes": {"amount": n}} for n in range(60)])  # 3 packs
    post_events(client, [{"counter": f"e{n}", "attributes": {"amount": n}} for n in range(60, 64)], 1)
    clock.advance(REPORT_SETTLE)

    assert run_now(client).json_body["superseded"] is False

    (report,) = all_reports(aws)
    assert report["events"] == 64
    assert {name: totals["sums"]["amount"] for name, totals in report["counters"].items()} == {
        f"e{n}": n for n in range(64)
    }
    assert all(totals["events"] == 1 for totals in report["counters"].values())


def test_given_a_pack_lost_on_the_way_when_audited_then_its_events_are_the_shortfall_and_the_repair_closes_it(
    client: Any, aws: Any, clock: Any
) -> None:
    start_audit(client)
    post_events(client, [{"counter": "ab"[i % 2], "time": clock.now - i * 4 * MINUTE} for i in range(60)])
    post_events(client, [{"counter": "a", "time": clock.now - MINUTE}], 1)
    records = stored_event_records(aws.dynamodb)
    lost = next(r for r in records if r["dynamodb"]["NewImage"]["kind"]["S"] == "pack")
    invoke(client, "on_event_records", lambda_event([r for r in records if r is not lost]))
    settle(clock)

    found = post_json(client, "/audit").json_body

    short = lost["dynamodb"]["Keys"]["pk"]["S"]
    assert found["shortfall"] == carried([lost]) == int(lost["dynamodb"]["NewImage"]["n"]["N"])
    assert [f["partition"] for f in found["short"]] == [short]
    assert found["short"][0]["stored"] == sum(
        carried([r]) for r in records if r["dynamodb"]["Keys"]["pk"]["S"] == short
    )

    repaired = post_json(client, "/audit/repair", {"partition": short}).json_body

    assert repaired["busy"] == [] and repaired["accounted"] and repaired["finding"]["shortfall"] == 0
    everything = [
        event(str(e["counter"]), int(e["time"]))
        for r in records
        for e in packs.events_in({k: _deserialize(v) for k, v in r["dynamodb"]["NewImage"].items()})
    ]
    assert stored_counts(aws.dynamodb, {"a", "b"}) == truth(everything)
    assert post_json(client, "/audit").json_body["shortfall"] == 0


def test_given_every_pack_counted_when_audited_then_every_partition_adds_up(client: Any, aws: Any, clock: Any) -> None:
    start_audit(client)
    post_events(client, [{"counter": "p", "time": clock.now - i * MINUTE} for i in range(100)])
    post_events(client, [{"counter": "p", "time": clock.now - i * MINUTE} for i in range(7)], 1)
    records = stored_event_records(aws.dynamodb)
    assert len(records) == 4 + 7 and carried(records) == 107
    invoke(client, "on_event_records", lambda_event(records))
    settle(clock)

    result = post_json(client, "/audit").json_body

    assert (result["shortfall"], result["short"]) == (0, [])
    assert result["audited"] > 0
    assert Decimal(107) == sum(
        Decimal(accounts(aws.dynamodb, pk)["applied"]) for pk in {r["dynamodb"]["Keys"]["pk"]["S"] for r in records}
    )


def refusing_counter(real: Any) -> Any:
    """DynamoDB refusing any update of the counter `refused` (data it will not take)."""
    return failing(real, "update_item", "ValidationException", lambda kwargs: "CTR#refused" in str(kwargs["Key"]))


def test_given_a_pack_event_set_aside_and_a_lost_pack_when_repaired_then_recount_skips_exactly_that_event(
    aws: Any,
) -> None:
    ingested = NOW - 60 * MINUTE
    pk = audit.partitions(ingested - ingested % audit.QUARTER_MS, SETTINGS.event_write_shards)[0]
    kept = [event("fine", ingested - 3 * MINUTE), event("refused", ingested - 2 * MINUTE), event("fine", ingested)]
    lost = [event("fine", ingested - k * MINUTE - 7) for k in range(4)]
    images = [pack_image(kept, pk, ingested), pack_image(lost, pk, ingested + 1)]
    for image in images:
        aws.dynamodb.put_item(TableName=SETTINGS.events_table, Item=image)
    result = apply(refusing_counter(aws.dynamodb), [record(images[0])], NOW)
    assert (result.counted, result.quarantined) == (2, [result.quarantined[0]])
    assert result.quarantined[0].endswith("#1")

    repaired = repair.repair(aws.dynamodb, SETTINGS, pk, NOW)

    assert repaired.busy == [] and repaired.accounted
    assert stored_counts(aws.dynamodb, {"fine"}) == truth([kept[0], kept[2], *lost])
    assert stored_counts(aws.dynamodb, {"refused"}) == {}  # set aside: not in its bucket until replayed
    numbers = accounts(aws.dynamodb, pk)
    assert (numbers["applied"], numbers["set_aside"], numbers["repaired"]) == (2, 1, 4)
