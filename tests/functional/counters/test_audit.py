"""The audit and its repair on moto: a shortfall made on purpose is found, listed once, and
closed by the repair (buckets exact against a brute-force count); a clean run finds nothing.

The stream handler writes the audit items of the records it is given (counters/audit_items.py);
`helpers.account` adds numbers on an audit item of a stream shard of its own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from chalicelib.core import keyspace, timebuckets
from chalicelib.core.settings import Settings
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import audit, audit_runs, breakdowns, layout, reads, repair, summary_writes
from chalicelib.events import ingest
from tests.fakes import Dying, Forwarding, Killed, recording
from tests.functional.helpers import (
    account,
    bucket_counts,
    invoke,
    partition,
    post_events,
    post_json,
    settle,
    start_audit,
)
from tests.functional.stream_fixtures import lambda_event, stored_event_records

SETTINGS = Settings()
MINUTE = 60_000
_deserialize = TypeDeserializer().deserialize
_serialize = TypeSerializer().serialize


def stored_events(dynamodb: Any) -> list[dict[str, Any]]:
    return [{k: _deserialize(v) for k, v in r["dynamodb"]["NewImage"].items()} for r in stored_event_records(dynamodb)]


def brute_force(dynamodb: Any) -> dict[tuple[str, str], int]:
    """Per (counter, bucket sort key): the events stored (generated ids: each counts once)."""
    counts: Counter[tuple[str, str]] = Counter()
    for item in stored_events(dynamodb):
        for bucket in timebuckets.buckets_for(int(item["time"])):
            counts[(item["counter"], f"{bucket.resolution[0]}#{bucket.index:010d}")] += 1
    return dict(counts)


def buckets(dynamodb: Any, counters: set[str]) -> dict[tuple[str, str], int]:
    return {
        (c, sk): n for c in counters for sk, n in bucket_counts(partition(dynamodb, f"{keyspace.COUNTER}{c}")).items()
    }


def minutes_exact(dynamodb: Any) -> bool:
    """Every minute's count (in its hour item, or inline in its day item) matches the stored events."""
    truth: Counter[tuple[str, int, int]] = Counter()
    for item in stored_events(dynamodb):
        t = int(item["time"])
        truth[(item["counter"], t // 3_600_000, timebuckets.minute_of_hour(t))] += 1
    for counter in {c for c, _, _ in truth}:
        stored: Counter[tuple[str, int, int]] = Counter()
        for i in partition(dynamodb, f"{keyspace.COUNTER}{counter}"):
            index = int(i["sk"]["S"][2:])
            if i["sk"]["S"].startswith("h#"):
                for k, v in i.items():
                    if k[0] == "m" and k[1:].isdigit():
                        stored[(counter, index, int(k[1:]))] += int(v["N"])
            else:
                for minute, n in layout.inline_minutes(i).items():
                    stored[(counter, index * 24 + minute // 60, minute % 60)] += n
        if +stored != +Counter({key: n for key, n in truth.items() if key[0] == counter}):
            return False
    return True


def ingest_and_count(client: Any, aws: Any, clock: Any, n: int, lose: int = 0) -> str | None:
    """POST n events (counters a and b, times over the last two hours), deliver their stream
    records but `lose` of the fullest partition's (the stream handler writes each partition's
    audit item for what it was given). Each event is sent alone (an item of the one-event
    layout, one record per event); packs are audited in test_packs.py. Returns the partition
    that lost records."""
    post_events(client, [{"counter": "ab"[i % 2], "time": clock.now - i * 4 * MINUTE} for i in range(n)], 1)
    records = [
        r for r in stored_event_records(aws.dynamodb) if r["dynamodb"]["NewImage"]["ingested_at"]["N"] == str(clock.now)
    ]
    per_pk = Counter(r["dynamodb"]["Keys"]["pk"]["S"] for r in records)
    short = per_pk.most_common(1)[0][0] if lose else None
    lost = [r for r in records if r["dynamodb"]["Keys"]["pk"]["S"] == short][:lose]
    delivered = [r for r in records if r not in lost]
    for start in range(0, len(delivered), 25):
        invoke(client, "on_event_records", lambda_event(delivered[start : start + 25]))
    return short


def test_given_records_lost_on_the_way_when_audited_then_the_shortfall_is_found_and_the_repair_closes_it(
    client: Any, aws: Any, clock: Any
) -> None:
    start_audit(client)
    short = ingest_and_count(client, aws, clock, 40, lose=3)
    assert buckets(aws.dynamodb, {"a", "b"}) != brute_force(aws.dynamodb)
    settle(clock)

    found = post_json(client, "/audit")

    assert found.status_code == 200, found.body
    assert found.json_body["shortfall"] == 3
    assert [f["partition"] for f in found.json_body["short"]] == [short]
    assert found.json_body["audited"] % SETTINGS.event_write_shards == 0 and found.json_body["audited"] > 0
    assert found.json_body["superseded"] is False
    listed = client.http.get("/audit").json_body
    assert [(p["partition"], p["shortfall"]) for p in listed["partitions"]] == [(short, 3)]

    repaired = post_json(client, "/audit/repair", {"partition": short})

    assert repaired.status_code == 200, repaired.body
    assert repaired.json_body["busy"] == [] and repaired.json_body["accounted"]
    assert repaired.json_body["written"] > 0 and repaired.json_body["finding"]["shortfall"] == 0
    assert buckets(aws.dynamodb, {"a", "b"}) == brute_force(aws.dynamodb)
    assert minutes_exact(aws.dynamodb)
    assert client.http.get("/audit").json_body == {"partitions": [], "next": None}
    again = post_json(client, "/audit").json_body
    assert (again["audited"], again["shortfall"], again["open"]) == (0, 0, 0)
    # Repairing again changes nothing.
    assert post_json(client, "/audit/repair", {"partition": short}).json_body["written"] == 0
    assert buckets(aws.dynamodb, {"a", "b"}) == brute_force(aws.dynamodb)


def test_given_every_record_counted_when_audited_then_nothing_is_listed(client: Any, aws: Any, clock: Any) -> None:
    start_audit(client)
    ingest_and_count(client, aws, clock, 30)
    settle(clock)

    result = post_json(client, "/audit").json_body

    assert (result["shortfall"], result["short"], result["superseded"]) == (0, [], False)
    assert result["audited"] > 0
    assert client.http.get("/audit").json_body["partitions"] == []


def test_given_a_partition_without_its_audit_item_when_audited_then_it_is_short_by_all_its_events(
    client: Any, aws: Any, clock: Any
) -> None:
    start_audit(client)
    post_events(client, [{"counter": "c"} for _ in range(5)])  # never reach the stream handler
    settle(clock)

    result = post_json(client, "/audit").json_body

    assert result["shortfall"] == 5
    assert sum(f["stored"] for f in result["short"]) == 5


def test_given_the_schedule_fires_twice_when_audited_then_each_partition_is_reported_once(
    client: Any, aws: Any, clock: Any
) -> None:
    start_audit(client)
    ingest_and_count(client, aws, clock, 20, lose=2)
    settle(clock)
    event = client.events.generate_cw_event("aws.events", "Scheduled Event", {}, [])

    first = invoke(client, "run_audit", event)
    second = invoke(client, "run_audit", event)

    assert (first["shortfall"], second["shortfall"]) == (2, 0)
    assert second["audited"] == 0 and second["open"] == 1
    assert len(client.http.get("/audit").json_body["partitions"]) == 1


class RacedBy(Forwarding):
    """A client on which another audit run commits just before this run's first transaction."""

    def __init__(self, real: Any, now_ms: int) -> None:
        super().__init__(real)
        self.now_ms, self.raced = now_ms, None

    def transact_write_items(self, **kwargs: Any) -> Any:
        if self.raced is None:
            self.raced = audit_runs.run(self.real, SETTINGS, self.now_ms)
        return self.real.transact_write_items(**kwargs)


def test_given_two_runs_at_once_when_both_read_the_same_partitions_then_one_reports_them(
    client: Any, aws: Any, clock: Any
) -> None:
    start_audit(client)
    ingest_and_count(client, aws, clock, 20, lose=2)
    settle(clock)
    racing = RacedBy(aws.dynamodb, clock.now)

    late = audit_runs.run(racing, SETTINGS, clock.now)

    assert racing.raced is not None and racing.raced.as_dict()["shortfall"] == 2
    assert late.superseded and late.as_dict()["shortfall"] == 0 and late.audited == 0
    assert len(client.http.get("/audit").json_body["partitions"]) == 1


def test_given_many_findings_when_listed_then_pages_follow_the_cursor(client: Any, aws: Any, clock: Any) -> None:
    start_audit(client)
    quarter = clock.now - clock.now % audit.QUARTER_MS
    expected = []
    for q in range(2):
        for shard in range(SETTINGS.event_write_shards):
            pk = ingest.partition_key(quarter - q * audit.QUARTER_MS, shard)
            item = {
                "pk": pk,
                "sk": f"x#{shard}",
                "kind": "event",
                "counter": "p",
                "id": "i",
                "time": 1,
                "retention": 60,
            }
            aws.dynamodb.put_item(TableName=SETTINGS.events_table, Item={k: _serialize(v) for k, v in item.items()})
            expected.append(pk)
    settle(clock)
    assert post_json(client, "/audit").json_body["shortfall"] == len(expected)

    pages, cursor = [], None
    while True:
        answer = client.http.get("/audit?limit=3" + (f"&cursor={cursor}" if cursor else ""))
        assert answer.status_code == 200
        pages.append([p["partition"] for p in answer.json_body["partitions"]])
        cursor = answer.json_body["next"]
        if cursor is None:
            break

    assert [pk for page in pages for pk in page] == sorted(expected)
    assert all(len(page) <= 3 for page in pages) and len(pages) >= 3
    assert client.http.get("/audit?cursor=not-one").status_code == 400
    assert client.http.get("/audit?limit=0").status_code == 400


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"partition": 7},
        {"partition": "2026111814#0"},
        {"partition": "202611181410#0"},
        {"partition": "202611181415#99"},
        {"partition": "209911181415#0"},
        {"partition": "202611181415#0", "more": 1},
    ],
)
def test_given_a_bad_repair_body_when_posted_then_400_and_nothing_written(client: Any, aws: Any, body: Any) -> None:
    answer = post_json(client, "/audit/repair", body)
    assert answer.status_code == 400, answer.body
    assert answer.json_body["Code"] == "BadRequestError"


@pytest.mark.parametrize("die_on", [1, 3])
def test_given_the_repair_dies_half_way_when_run_again_then_exact(
    client: Any, aws: Any, clock: Any, die_on: int
) -> None:
    start_audit(client)
    short = ingest_and_count(client, aws, clock, 40, lose=4)
    settle(clock)
    post_json(client, "/audit")
    assert short is not None

    with pytest.raises(Killed):
        repair.repair(Dying(aws.dynamodb, die_on, after=True, methods=("update_item",)), SETTINGS, short, clock.now)
    result = repair.repair(aws.dynamodb, SETTINGS, short, clock.now)

    assert result.busy == [] and result.accounted
    assert buckets(aws.dynamodb, {"a", "b"}) == brute_force(aws.dynamodb)
    assert minutes_exact(aws.dynamodb)
    assert client.http.get("/audit").json_body["partitions"] == []


class StreamWritesFirst(Forwarding):
    """The stream handler counts a new event of the same buckets between the repair's read of a
    bucket and its write: the first conditional UpdateItem of a bucket meets a changed bucket."""

    def __init__(self, real: Any, client: Any, clock: Any) -> None:
        super().__init__(real)
        self.client, self.clock, self.done = client, clock, False

    def update_item(self, **kwargs: Any) -> Any:
        if not self.done and kwargs["Key"]["pk"]["S"].startswith(keyspace.COUNTER):
            self.done = True
            ingest_and_count(self.client, self.real_aws, self.clock, 1)
        return self.real.update_item(**kwargs)


def test_given_live_counting_during_the_repair_when_a_bucket_changes_then_it_is_recounted_and_exact(
    client: Any, aws: Any, clock: Any
) -> None:
    start_audit(client)
    short = ingest_and_count(client, aws, clock, 30, lose=3)
    settle(clock)
    post_json(client, "/audit")
    assert short is not None
    racing = StreamWritesFirst(aws.dynamodb, client, clock)
    racing.real_aws = aws  # type: ignore[attr-defined]

    result = repair.repair(racing, SETTINGS, short, clock.now)

    assert racing.done and result.busy == [] and result.accounted
    assert buckets(aws.dynamodb, {"a", "b"}) == brute_force(aws.dynamodb)
    assert minutes_exact(aws.dynamodb)


def test_given_records_still_on_their_way_when_repaired_then_their_buckets_wait_and_later_come_out_exact(
    client: Any, aws: Any, clock: Any
) -> None:
    start_audit(client)
    short = ingest_and_count(client, aws, clock, 30, lose=3)
    settle(clock)
    post_json(client, "/audit")
    assert short is not None
    # An event of counter a in the last hour, stored, not yet through the stream.
    post_events(client, [{"counter": "a", "time": clock.now - 50 * MINUTE}])
    pending = [
        r for r in stored_event_records(aws.dynamodb) if r["dynamodb"]["NewImage"]["ingested_at"]["N"] == str(clock.now)
    ]

    waiting = post_json(client, "/audit/repair", {"partition": short}).json_body

    assert waiting["busy"] and not waiting["accounted"]
    assert {b["counter"] for b in waiting["busy"]} == {"a"}
    invoke(client, "on_event_records", lambda_event(pending))
    done = post_json(client, "/audit/repair", {"partition": short}).json_body
    assert done["busy"] == [] and done["accounted"]
    assert buckets(aws.dynamodb, {"a", "b"}) == brute_force(aws.dynamodb)


def test_given_a_partition_of_more_than_one_query_page_when_audited_then_every_page_is_counted(
    client: Any, aws: Any, clock: Any
) -> None:
    start_audit(client)
    pk = ingest.partition_key(clock.now, 0)
    for n in range(90):  # 90 items of about 15 KB: more than a Query's 1 MB page
        item = {
            "pk": pk,
            "sk": f"s#{n:03d}",
            "kind": "event",
            "counter": "big",
            "id": f"i{n}",
            "time": 1,
            "retention": 60,
            "attributes": {"blob": "x" * 15_000},
        }
        aws.dynamodb.put_item(TableName=SETTINGS.events_table, Item={k: _serialize(v) for k, v in item.items()})
    pages = aws.dynamodb.query(
        TableName=SETTINGS.events_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}},
        Select="COUNT",
    )
    assert "LastEvaluatedKey" in pages and pages["Count"] < 90  # one page is not the partition
    account(aws.dynamodb, pk, clock.now, applied=90)
    settle(clock)

    result = post_json(client, "/audit").json_body

    assert result["audited"] > 0 and result["short"] == []


def test_given_records_with_dimensions_lost_on_the_way_when_repaired_then_filtered_counts_exact_too(
    client: Any, aws: Any, clock: Any
) -> None:
    start_audit(client)
    sent = [
        {"counter": "f", "time": clock.now - i * 4 * MINUTE, "dimensions": {"provider": f"p{i % 3}", "region": "eu"}}
        for i in range(30)
    ]
    post_events(client, sent, 1)
    records = stored_event_records(aws.dynamodb)
    short = Counter(r["dynamodb"]["Keys"]["pk"]["S"] for r in records).most_common(1)[0][0]
    lost = [r for r in records if r["dynamodb"]["Keys"]["pk"]["S"] == short][:3]
    invoke(client, "on_event_records", lambda_event([r for r in records if r not in lost]))
    settle(clock)
    assert post_json(client, "/audit").json_body["shortfall"] == 3
    first, last = (clock.now - 3 * 3_600_000) // MINUTE, clock.now // MINUTE

    def filtered() -> dict[tuple[tuple[str, str], ...], int]:
        wheres = [{"provider": f"p{p}"} for p in range(3)] + [{"region": "eu"}]
        wheres += [{"provider": f"p{p}", "region": "eu"} for p in range(3)]
        return {
            tuple(sorted(w.items())): reads.count_window(
                aws.dynamodb, SETTINGS, "f", first, last, clock.now, where=w
            ).count
            for w in wheres
        }

    truth = {
        tuple(sorted(w.items())): sum(1 for e in sent if all(e["dimensions"][k] == v for k, v in w.items()))
        for w in map(dict, filtered())
    }
    assert filtered() != truth

    repaired = post_json(client, "/audit/repair", {"partition": short}).json_body

    assert repaired["busy"] == [] and repaired["accounted"]
    assert filtered() == truth
    assert reads.count_window(aws.dynamodb, SETTINGS, "f", first, last, clock.now).count == len(sent)


def summary_items(dynamodb: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (i["pk"]["S"], i["sk"]["S"]): i
        for i in dynamodb.scan(TableName=SETTINGS.counts_table)["Items"]
        if i["pk"]["S"].startswith(keyspace.SUMMARY)
    }


def lose_some_with_dimensions(
    client: Any, aws: Any, clock: Any, lose: int, values: Callable[[int], dict[str, Any]] | None = None
) -> tuple[list[dict[str, Any]], str]:
    """30 events of counter f with a provider and an amount (or `values(i)`) over the last two
    hours, each sent alone; every record delivered but `lose` of the fullest partition's.
    Returns what was sent and the partition that lost records."""
    sent = [
        {
            "counter": "f",
            "time": clock.now - i * 4 * MINUTE,
            "dimensions": {"provider": f"p{i % 4 % 3}", "region": "eu"},
            "values": values(i) if values else {"amount": i + 0.25},
        }
        for i in range(30)
    ]
    post_events(client, sent, 1)
    records = stored_event_records(aws.dynamodb)
    short = Counter(r["dynamodb"]["Keys"]["pk"]["S"] for r in records).most_common(1)[0][0]
    lost = [r for r in records if r["dynamodb"]["Keys"]["pk"]["S"] == short][:lose]
    invoke(client, "on_event_records", lambda_event([r for r in records if r not in lost]))
    settle(clock)
    return sent, short


def breakdown_truth(sent: list[dict[str, Any]], first: int, last: int, limit: int) -> dict[str, Any]:
    """The breakdown by provider of the events sent in minutes first..last, by brute force."""
    counts: Counter[str] = Counter()
    sums: dict[str, Decimal] = {}
    for event in sent:
        if first <= event["time"] // MINUTE <= last:
            value = event["dimensions"]["provider"]
            counts[value] += 1
            sums[value] = sums.get(value, Decimal(0)) + Decimal(str(event["values"]["amount"]))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "values": [(v, n, {"amount": sums[v]}) for v, n in ranked[:limit]],
        "others": {"values": max(0, len(ranked) - limit), "count": sum(n for _, n in ranked[limit:])},
        "exact": True,
    }


def breakdown_read(aws: Any, first: int, last: int, limit: int, now: int) -> dict[str, Any]:
    answer = breakdowns.breakdown(aws.dynamodb, SETTINGS, "f", "provider", first, last, limit, {}, now)
    return {
        "values": [
            (v["value"], v["count"], {k: Decimal(s) for k, s in v["sums_exact"].items()}) for v in answer["values"]
        ],
        "others": answer["others"],
        "exact": answer["exact"],
    }


@pytest.mark.parametrize("single_bytes", [summary_writes.SINGLE_BYTES, 120])
def test_given_records_with_dimensions_lost_on_the_way_when_repaired_then_breakdowns_exact_too(
    client: Any, aws: Any, clock: Any, monkeypatch: Any, single_bytes: int
) -> None:
    # 120 bytes hold about three entries: the day's summary is split into parts (and busy hours
    # into parts and quarter hours) by the stream, or by the repair's recount.
    monkeypatch.setattr(summary_writes, "SINGLE_BYTES", single_bytes)
    start_audit(client)
    sent, short = lose_some_with_dimensions(client, aws, clock, lose=3)
    assert post_json(client, "/audit").json_body["shortfall"] == 3
    now_minute = clock.now // MINUTE
    # A window of whole hours and days, and one that cuts hours (their minutes are read).
    windows = [(now_minute - 3 * 60, now_minute, 2), (now_minute - 75, now_minute - 10, 3)]
    assert any(breakdown_read(aws, f, la, k, clock.now) != breakdown_truth(sent, f, la, k) for f, la, k in windows)

    repaired = post_json(client, "/audit/repair", {"partition": short}).json_body

    assert repaired["busy"] == [] and repaired["accounted"]
    for first, last, limit in windows:
        assert breakdown_read(aws, first, last, limit, clock.now) == breakdown_truth(sent, first, last, limit)
    assert repaired["summaries_written"] > 0
    layouts = {i.get(layout.LAYOUT, {}).get("S") for i in summary_items(aws.dynamodb).values()} - {None}
    assert layouts == ({layout.SINGLE} if single_bytes > 1000 else {layout.SINGLE, "parts"})
    # Repairing again changes nothing.
    before = summary_items(aws.dynamodb)
    again = post_json(client, "/audit/repair", {"partition": short}).json_body
    assert again["summaries_written"] == 0 and summary_items(aws.dynamodb) == before


def test_given_a_partition_counted_whole_when_repaired_then_its_summaries_are_left_as_they_are(
    client: Any, aws: Any, clock: Any
) -> None:
    start_audit(client)
    sent, _ = lose_some_with_dimensions(client, aws, clock, lose=0)
    records = stored_event_records(aws.dynamodb)
    clean = records[0]["dynamodb"]["Keys"]["pk"]["S"]
    before = summary_items(aws.dynamodb)

    result = post_json(client, "/audit/repair", {"partition": clean}).json_body

    assert result["busy"] == [] and result["summaries_written"] == 0 and result["summaries_unchanged"] > 0
    assert summary_items(aws.dynamodb) == before
    window = (clock.now // MINUTE - 3 * 60, clock.now // MINUTE, 2)
    assert breakdown_read(aws, *window, clock.now) == breakdown_truth(sent, *window)


class StreamSummarizesFirst(Forwarding):
    """The stream handler counts a new event of counter f between the repair's read of a
    breakdown summary and its write: the repair's first write of a summary the new event is
    merged into (today's, or this hour's: its parts and quarter hours) meets a changed one."""

    def __init__(self, real: Any, client: Any, aws: Any, clock: Any, sent: list[dict[str, Any]]) -> None:
        super().__init__(real)
        self.client, self.aws, self.clock, self.sent, self.done = client, aws, clock, sent, False
        self.refused = 0

    def _meet(self, items: list[dict[str, Any]]) -> None:
        hour, day = timebuckets.buckets_for(self.clock.now)
        merged_into = (
            f"d#{day.index:010d}#",
            f"h#{hour.index:010d}#",
            *(f"q#{hour.index * 4 + q:010d}#" for q in range(4)),
        )
        if self.done or not any(
            i["pk"]["S"].startswith(keyspace.SUMMARY) and i["sk"]["S"].startswith(merged_into) for i in items
        ):
            return
        self.done = True
        event = {
            "counter": "f",
            "time": self.clock.now - 2 * MINUTE,
            "dimensions": {"provider": "p1", "region": "eu"},
            "values": {"amount": 0.5},
        }
        post_events(self.client, [event])
        self.sent.append(event)
        fresh = [
            r
            for r in stored_event_records(self.aws.dynamodb)
            if r["dynamodb"]["NewImage"]["ingested_at"]["N"] == str(self.clock.now)
        ]
        invoke(self.client, "on_event_records", lambda_event(fresh))

    def put_item(self, **kwargs: Any) -> Any:
        self._meet([kwargs["Item"]])
        try:
            return self.real.put_item(**kwargs)
        except ClientError:
            self.refused += 1
            raise

    def transact_write_items(self, **kwargs: Any) -> Any:
        self._meet([t["Put"]["Item"] for t in kwargs["TransactItems"] if "Put" in t])
        try:
            return self.real.transact_write_items(**kwargs)
        except ClientError:
            self.refused += 1
            raise


@pytest.mark.parametrize("single_bytes", [summary_writes.SINGLE_BYTES, 120])
def test_given_live_counting_during_the_repair_when_a_summary_changes_then_it_is_recounted_and_exact(
    client: Any, aws: Any, clock: Any, monkeypatch: Any, single_bytes: int
) -> None:
    monkeypatch.setattr(summary_writes, "SINGLE_BYTES", single_bytes)
    start_audit(client)
    sent, short = lose_some_with_dimensions(client, aws, clock, lose=3)
    post_json(client, "/audit")
    racing = StreamSummarizesFirst(aws.dynamodb, client, aws, clock, sent)

    result = repair.repair(racing, SETTINGS, short, clock.now)

    assert racing.done and racing.refused > 0
    assert result.busy == [] and result.busy_summaries == [] and result.accounted
    window = (clock.now // MINUTE - 3 * 60, clock.now // MINUTE, 3)
    assert breakdown_read(aws, *window, clock.now) == breakdown_truth(sent, *window)
    cut = (clock.now // MINUTE - 30, clock.now // MINUTE, 3)
    assert breakdown_read(aws, *cut, clock.now) == breakdown_truth(sent, *cut)


# -- the buckets' sums ------------------------------------------------------------------------

WHERES: list[dict[str, str]] = [{}, {"provider": "p1"}, {"region": "eu"}, {"provider": "p0", "region": "eu"}]


def two_values(i: int) -> dict[str, Any]:
    """An amount with a fraction and a size, the second one negative now and then."""
    return {"amount": i + 0.5, "bytes": (-1) ** (i // 7) * (1000 + i)}


def sums_truth(sent: list[dict[str, Any]], first: int, last: int, where: dict[str, str]) -> dict[str, Decimal]:
    """The sum of each value of the events sent in minutes first..last having `where`, by brute force."""
    sums: dict[str, Decimal] = {}
    for event in sent:
        if first <= event["time"] // MINUTE <= last and all(event["dimensions"].get(k) == v for k, v in where.items()):
            for name, amount in event["values"].items():
                sums[name] = sums.get(name, Decimal(0)) + Decimal(str(amount))
    return sums


def sums_read(client: Any, first: int, last: int, where: dict[str, str]) -> dict[str, Decimal]:
    """`GET /counters/f`'s exact sums over minutes first..last, filtered by `where`."""
    query = f"start={first * MINUTE}&end={last * MINUTE}" + "".join(f"&where={k}:{v}" for k, v in where.items())
    answer = client.http.get(f"/counters/f?{query}")
    assert answer.status_code == 200, answer.body
    assert "sums_complete" not in answer.json_body
    return {name: Decimal(s) for name, s in answer.json_body["sums_exact"].items()}


def sum_windows(now: int) -> list[tuple[int, int]]:
    """Whole hours and a day (day items read), and a window cutting hours (minutes read)."""
    minute = now // MINUTE
    return [(minute - 3 * 60, minute), (minute - 75, minute - 10), (minute - 30 * 60, minute)]


def sums_exact(client: Any, sent: list[dict[str, Any]], now: int) -> bool:
    return all(
        sums_read(client, first, last, where) == sums_truth(sent, first, last, where)
        for first, last in sum_windows(now)
        for where in WHERES
    )


def bucket_items(dynamodb: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Every bucket item of the counters and filter counters, as stored."""
    return {
        (i["pk"]["S"], i["sk"]["S"]): i
        for i in dynamodb.scan(TableName=SETTINGS.counts_table)["Items"]
        if i["pk"]["S"].startswith((keyspace.COUNTER, keyspace.FILTER))
    }


def test_given_records_with_values_lost_on_the_way_when_repaired_then_sums_plain_and_filtered_exact(
    client: Any, aws: Any, clock: Any
) -> None:
    start_audit(client)
    sent, short = lose_some_with_dimensions(client, aws, clock, lose=3, values=two_values)
    assert post_json(client, "/audit").json_body["shortfall"] == 3
    assert not sums_exact(client, sent, clock.now)

    repaired = post_json(client, "/audit/repair", {"partition": short}).json_body

    assert repaired["busy"] == [] and repaired["accounted"] and repaired["written"] > 0
    assert sums_exact(client, sent, clock.now)
    # Repairing again changes nothing.
    before = bucket_items(aws.dynamodb)
    again = post_json(client, "/audit/repair", {"partition": short}).json_body
    assert again["written"] == 0 and again["unchanged"] == repaired["buckets"]
    assert bucket_items(aws.dynamodb) == before


def test_given_more_value_names_than_slots_when_repaired_then_each_bucket_sums_its_slots_exactly_and_counts_the_rest(
    client: Any, aws: Any, clock: Any
) -> None:
    # 12 names, two per event: a bucket of more than 8 of them sums 8 in slots and counts the
    # values of the others in `vx`, as the stream handler does.
    start_audit(client)
    sent, short = lose_some_with_dimensions(
        client, aws, clock, lose=4, values=lambda i: {f"n{i % 12}": i + 0.5, f"n{(i + 5) % 12}": -i}
    )
    post_json(client, "/audit")

    def as_counted() -> bool:
        for (pk, sk), item in bucket_items(aws.dynamodb).items():
            if pk != f"{keyspace.COUNTER}f":
                continue
            index, resolution = int(sk[2:]), "hour" if sk[0] == "h" else "day"
            events = [e for e in sent if Bucket(resolution, index) in timebuckets.buckets_for(e["time"])]
            slots = layout.slots_of(item)
            truth: dict[str, Decimal] = {}
            for event in events:
                for name, amount in event["values"].items():
                    truth[name] = truth.get(name, Decimal(0)) + Decimal(str(amount))
            values = sum(len(e["values"]) for e in events)
            summed = sum(len(e["values"].keys() & set(slots.values())) for e in events)
            if len(slots) > layout.MAX_SUM_NAMES or layout.not_summed(item) != values - summed:
                return False
            if layout.sums_of(item, None, resolution) != {n: truth[n] for n in slots.values()}:
                return False
            if len(truth) > layout.MAX_SUM_NAMES and len(slots) < layout.MAX_SUM_NAMES:
                return False  # a free slot left while a name goes unsummed
        return True

    assert not as_counted()

    repaired = post_json(client, "/audit/repair", {"partition": short}).json_body

    assert repaired["busy"] == [] and repaired["accounted"]
    assert as_counted()
    before = bucket_items(aws.dynamodb)
    assert post_json(client, "/audit/repair", {"partition": short}).json_body["written"] == 0
    assert bucket_items(aws.dynamodb) == before


def test_given_a_partition_counted_whole_when_repaired_then_its_buckets_are_left_byte_identical(
    client: Any, aws: Any, clock: Any
) -> None:
    # Sums with fractions, negatives and a name whose sums are all 0: what the stream stored (or
    # an earlier repair wrote) is what the recount finds, so nothing is written.
    start_audit(client)
    sent, short = lose_some_with_dimensions(client, aws, clock, lose=3, values=lambda i: {**two_values(i), "zero": 0})
    post_json(client, "/audit")
    assert post_json(client, "/audit/repair", {"partition": short}).json_body["accounted"]
    clean = next(
        r["dynamodb"]["Keys"]["pk"]["S"]
        for r in stored_event_records(aws.dynamodb)
        if r["dynamodb"]["Keys"]["pk"]["S"] != short
    )
    before = bucket_items(aws.dynamodb)

    result = post_json(client, "/audit/repair", {"partition": clean}).json_body

    assert result["busy"] == [] and result["written"] == 0 and result["unchanged"] == result["buckets"] > 0
    assert bucket_items(aws.dynamodb) == before
    assert sums_exact(client, sent, clock.now)


class StreamCountsValuesFirst(Forwarding):
    """The stream handler counts a new event of counter f, with values, in the bucket the repair
    is writing, just before the repair's `meet_on`-th UpdateItem of that bucket (the first: the
    recount's own write; the second: sums that did not fit it), in a minute whose sums that
    UpdateItem sets."""

    def __init__(self, real: Any, client: Any, aws: Any, clock: Any, sent: list[dict[str, Any]], meet_on: int) -> None:
        super().__init__(real)
        self.client, self.aws, self.clock, self.sent, self.meet_on = client, aws, clock, sent, meet_on
        self.calls: Counter[tuple[str, str]] = Counter()
        self.met: tuple[str, str] | None = None
        self.refused_met = False

    def update_item(self, **kwargs: Any) -> Any:
        key = (kwargs["Key"]["pk"]["S"], kwargs["Key"]["sk"]["S"])
        meet = False
        if key[0] == f"{keyspace.COUNTER}f" and self.met is None:
            self.calls[key] += 1
            sums = sorted(a for a in kwargs["ExpressionAttributeNames"].values() if a[0] in "vt" and a[1:].isdigit())
            if self.calls[key] == self.meet_on and sums:
                self.met, meet = key, True
                self._count_one(key[1], sums[-1])
        try:
            return self.real.update_item(**kwargs)
        except ClientError:
            self.refused_met = self.refused_met or meet
            raise

    def _count_one(self, sk: str, attribute: str) -> None:
        resolution = "hour" if sk[0] == "h" else "day"
        start = Bucket(resolution, int(sk[2:])).start_ms
        minute = int(attribute[1:3]) if resolution == "hour" else 0
        event = {
            "counter": "f",
            "time": min(start + minute * MINUTE + 30_000, self.clock.now),
            "dimensions": {"provider": "p1", "region": "eu"},
            "values": {"amount": 0.75, "bytes": 5},
        }
        post_events(self.client, [event])
        self.sent.append(event)
        fresh = [
            r
            for r in stored_event_records(self.aws.dynamodb)
            if r["dynamodb"]["NewImage"]["ingested_at"]["N"] == str(self.clock.now)
        ]
        invoke(self.client, "on_event_records", lambda_event(fresh))


@pytest.mark.parametrize(("meet_on", "expression_chars"), [(1, repair.EXPRESSION_CHARS), (2, 150)])
def test_given_live_counting_during_the_repair_when_a_bucket_changes_then_its_sums_are_recounted_and_exact(
    client: Any, aws: Any, clock: Any, monkeypatch: Any, meet_on: int, expression_chars: int
) -> None:
    # 150 characters hold a few sums: a bucket's sums go in several updates, and the stream
    # writes between the first and the second.
    monkeypatch.setattr(repair, "EXPRESSION_CHARS", expression_chars)
    start_audit(client)
    sent, short = lose_some_with_dimensions(client, aws, clock, lose=3, values=two_values)
    post_json(client, "/audit")
    racing = StreamCountsValuesFirst(aws.dynamodb, client, aws, clock, sent, meet_on)

    result = repair.repair(racing, SETTINGS, short, clock.now)

    assert racing.met is not None and racing.refused_met
    assert result.busy == [] and result.accounted
    assert sums_exact(client, sent, clock.now)
    assert buckets(aws.dynamodb, {"f"}) == brute_force(aws.dynamodb)


@pytest.mark.parametrize("die_on", [2, 5])
def test_given_the_repair_dies_between_a_buckets_updates_when_run_again_then_its_sums_are_exact(
    client: Any, aws: Any, clock: Any, monkeypatch: Any, die_on: int
) -> None:
    monkeypatch.setattr(repair, "EXPRESSION_CHARS", 150)
    start_audit(client)
    sent, short = lose_some_with_dimensions(client, aws, clock, lose=3, values=two_values)
    post_json(client, "/audit")

    with pytest.raises(Killed):
        repair.repair(Dying(aws.dynamodb, die_on, after=True, methods=("update_item",)), SETTINGS, short, clock.now)
    result = repair.repair(aws.dynamodb, SETTINGS, short, clock.now)

    assert result.busy == [] and result.accounted
    assert sums_exact(client, sent, clock.now)


def test_given_a_whole_hour_of_every_value_name_lost_when_repaired_then_its_sums_are_written_in_several_updates_and_exact(
    client: Any, aws: Any, clock: Any
) -> None:
    # 8 value names in each of an hour's 60 minutes, none through the stream: the hour item's
    # recount is 60 minutes and 480 sums, more than one expression of 4 KB holds.
    start_audit(client)
    hour = (clock.now // 3_600_000 - 1) * 3_600_000
    sent = [
        {
            "counter": "f",
            "time": hour + m * MINUTE,
            "dimensions": {"provider": f"p{m % 3}"},
            "values": {f"v{k}": m + k / 4 for k in range(8)},
        }
        for m in range(60)
    ]
    post_events(client, sent, 1)
    settle(clock)
    short = post_json(client, "/audit").json_body["short"]
    assert sum(f["shortfall"] for f in short) == 60
    writes: list[dict[str, Any]] = []

    # Every short partition: the events are spread over the write shards at random, and a
    # partition's repair recounts only the buckets its own events fall in.
    results = [
        repair.repair(recording(aws.dynamodb, "update_item", writes), SETTINGS, f["partition"], clock.now)
        for f in short
    ]

    assert all(r.busy == [] and r.accounted for r in results)
    hour_key = (f"{keyspace.COUNTER}f", f"h#{hour // 3_600_000:010d}")
    updates = [w for w in writes if (w["Key"]["pk"]["S"], w["Key"]["sk"]["S"]) == hour_key]
    assert len(updates) > 1 and all(len(w["UpdateExpression"].encode()) <= 4096 for w in updates)
    for first, last in [(hour // MINUTE, hour // MINUTE + 59), (hour // MINUTE + 7, hour // MINUTE + 31)]:
        for where in [{}, {"provider": "p1"}]:
            assert sums_read(client, first, last, where) == sums_truth(sent, first, last, where)
