"""Counts, sums, filters and breakdowns by dimension, against brute force, on moto.

Events with dimensions and values are fed to the stream handler the ways Lambda may deliver
them (batches cut anywhere, delivered twice, a handler dying before or right after any write
and the batch delivered again, records of one partition key through two shards), then counts,
exact sums, `where` filters and breakdowns over random windows are compared with the events
themselves.
"""

from __future__ import annotations

import itertools
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeSerializer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chalicelib.core import decimals
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.counters import breakdowns, layout, reads, stream, summary_writes, topk
from chalicelib.events.stream_records import from_lambda_event
from tests.fakes import Dying, Killed
from tests.functional.stream_fixtures import lambda_event, record

NOW = 1_795_000_000_000
MINUTE = 60_000
SETTINGS = Settings()
_serializer = TypeSerializer()
_names = itertools.count()
PROVIDERS = ["p1", "p2", "p:3", "p4"]
REGIONS = ["eu", "us"]


def image(pk: str, counter: str, t: int, dims: dict[str, str], values: dict[str, Decimal]) -> dict[str, Any]:
    n = next(_names)
    plain: dict[str, Any] = {
        "pk": pk,
        "sk": f"2026-11-18T08:26:40.000Z#{n:08d}",
        "kind": "event",
        "counter": counter,
        "id": f"gen-{n}",
        "id_given": False,
        "time": t,
        "retention": 7 * 86400,
    }
    if dims:
        plain["dimensions"] = dims
    if values:
        plain["values"] = values
    return {k: _serializer.serialize(v) for k, v in plain.items()}


def apply(dynamodb: Any, records: list[dict[str, Any]], shard: str) -> None:
    stream.apply_stream_batch(dynamodb, SETTINGS, from_lambda_event(lambda_event(records, shard)), NOW, lambda s: None)


def plain(img: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Decimal]]:
    t = int(img["time"]["N"])
    dims = {k: v["S"] for k, v in img.get("dimensions", {}).get("M", {}).items()}
    values = {k: Decimal(v["N"]) for k, v in img.get("values", {}).get("M", {}).items()}
    return t, dims, values


def brute(
    images: list[dict[str, Any]], first: int, last: int, where: dict[str, str]
) -> tuple[int, dict[str, Decimal], Counter[str]]:
    """Count, sums and per-provider counts of the events in minutes first..last matching `where`."""
    count, sums, per = 0, {}, Counter[str]()
    for img in images:
        t, dims, values = plain(img)
        if not first <= t // MINUTE <= last or any(dims.get(k) != v for k, v in where.items()):
            continue
        count += 1
        for name, amount in values.items():
            sums[name] = decimals.EXACT.add(sums.get(name, Decimal(0)), amount)
        if "provider" in dims:
            per[dims["provider"]] += 1
    return count, sums, per


@st.composite
def workloads(draw: Any) -> tuple[str, list[dict[str, Any]], list[tuple[int, int, int | None, bool]]]:
    counter = f"jobs{next(_names)}"
    n = draw(st.integers(1, 25))
    images = []
    for i in range(n):
        dims: dict[str, str] = {}
        if draw(st.integers(0, 4)):
            dims["provider"] = draw(st.sampled_from(PROVIDERS))
        if draw(st.booleans()):
            dims["region"] = draw(st.sampled_from(REGIONS))
        values = {}
        if draw(st.booleans()):
            values["amount"] = Decimal(draw(st.integers(-5000, 5000))) / 100
        t = NOW - draw(st.integers(0, 30 * 60)) * MINUTE
        images.append(dict(image(f"q#{i % 2}", counter, t, dims, values), stream_shard=draw(st.integers(0, 1))))
    schedule = draw(
        st.lists(
            st.tuples(
                st.integers(0, 1),  # which shard's poller runs
                st.integers(1, 10),  # batch size
                st.one_of(st.none(), st.integers(1, 40)),  # dies on this write
                st.booleans(),  # the checkpoint moves after a success
            ),
            max_size=12,
        )
    )
    return counter, images, schedule


def drain(dynamodb: Any, tagged: list[dict[str, Any]], schedule: list[tuple[int, int, int | None, bool]]) -> None:
    by_shard: dict[int, list[dict[str, Any]]] = {}
    for img in tagged:
        by_shard.setdefault(img["stream_shard"], []).append(
            record({k: v for k, v in img.items() if k != "stream_shard"})
        )
    checkpoint = dict.fromkeys(by_shard, 0)
    for shard, size, die_on, saved in schedule:
        batch = by_shard.get(shard, [])[checkpoint.get(shard, 0) : checkpoint.get(shard, 0) + size]
        if not batch:
            continue
        try:
            apply(dynamodb if die_on is None else Dying(dynamodb, die_on), batch, f"shard-{shard}")
        except Killed:
            continue
        if saved:
            checkpoint[shard] += len(batch)
    for shard, records in by_shard.items():
        while checkpoint[shard] < len(records):
            apply(dynamodb, records[checkpoint[shard] : checkpoint[shard] + 6], f"shard-{shard}")
            checkpoint[shard] += 6


@pytest.mark.parametrize("single_bytes", [summary_writes.SINGLE_BYTES, 120], ids=["kept-whole", "split-mid-way"])
def test_given_events_with_dimensions_under_any_delivery_when_read_over_random_windows_then_exact(
    aws: Any, monkeypatch: Any, single_bytes: int
) -> None:
    # 120 bytes hold about three entries: summaries are split into parts and quarter hours while
    # batches are delivered twice and handlers die, between any two writes or in the split itself.
    monkeypatch.setattr(summary_writes, "SINGLE_BYTES", single_bytes)

    # The same 25 examples every run: the layout assertion after the property needs at least one
    # of them to outgrow a summary item, which a random draw of 25 does not always do.
    @settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(workloads(), st.data())
    def check(case: tuple[str, list[dict[str, Any]], list[tuple[int, int, int | None, bool]]], data: Any) -> None:
        counter, tagged, schedule = case
        drain(aws.dynamodb, tagged, schedule)
        images = [{k: v for k, v in img.items() if k != "stream_shard"} for img in tagged]
        last_now = NOW // MINUTE
        for _ in range(3):
            first = data.draw(st.integers(last_now - 40, last_now))
            last = data.draw(st.integers(first, last_now + 2))
            where: dict[str, str] = {}
            if data.draw(st.booleans()):
                where["provider"] = data.draw(st.sampled_from(PROVIDERS))
            if data.draw(st.booleans()):
                where["region"] = data.draw(st.sampled_from(REGIONS))
            count, sums, per = brute(images, first, last, where)
            window = reads.count_window(aws.dynamodb, SETTINGS, counter, first, last, NOW, where=where)
            assert (window.count, window.sums) == (count, sums), where
            limit = data.draw(st.integers(1, 5))
            answer = breakdowns.breakdown(aws.dynamodb, SETTINGS, counter, "provider", first, last, limit, where, NOW)
            ranked = sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))
            assert [(v["value"], v["count"]) for v in answer["values"]] == ranked[:limit]
            assert answer["exact"] is True
            assert answer["others"] == {
                "values": max(0, len(ranked) - limit),
                "count": count - sum(per[v] for v, _ in ranked[:limit]),
            }
            for listed in answer["values"]:
                _, value_sums, _ = brute(images, first, last, {**where, "provider": listed["value"]})
                assert {k: Decimal(str(v)) for k, v in listed["sums"].items()} == value_sums

    check()
    head_layouts = {
        item.get(layout.LAYOUT, {}).get("S")
        for item in aws.dynamodb.scan(TableName=SETTINGS.counts_table)["Items"]
        if item["pk"]["S"].startswith("TOP#") and item["sk"]["S"].endswith("#0") and item["sk"]["S"][0] in "hd"
    }
    assert head_layouts == ({layout.SINGLE} if single_bytes > 1000 else {layout.SINGLE, "parts"})


def test_given_more_values_than_summaries_hold_when_broken_down_then_listed_exact_and_bound_honest(
    aws: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(topk, "MAX_BYTES", 400)  # a few entries per summary item
    heavy = ["h1", "h2", "h3"]
    images = []
    for i in range(240):
        value = heavy[i % 3] if i % 2 else f"rare-{i}"
        dims = {"provider": value}
        images.append(image("q#0", "wide", NOW - (i % 90) * MINUTE, dims, {"amount": Decimal(1)}))
    records = [record(img) for img in images]
    for start in range(0, len(records), 40):
        apply(aws.dynamodb, records[start : start + 40], "shard-0")
    first, last = NOW // MINUTE - 120, NOW // MINUTE
    answer = breakdowns.breakdown(aws.dynamodb, SETTINGS, "wide", "provider", first, last, 3, {}, NOW)
    count, _, per = brute(images, first, last, {})
    assert answer["exact"] is False
    assert [(v["value"], v["count"]) for v in answer["values"]] == [(h, per[h]) for h in sorted(heavy)]
    assert all(v["sums"] == {"amount": per[v["value"]]} for v in answer["values"])
    assert sum(v["count"] for v in answer["values"]) + answer["others"]["count"] == count
    assert max(n for v, n in per.items() if v not in heavy) <= answer["bound"]
    assert 0 < answer["others"]["values"] <= len(per) - 3


def test_given_events_posted_with_dimensions_when_read_over_http_then_counts_sums_filters_and_breakdown(
    client: Any, aws: Any, clock: Any
) -> None:
    from tests.functional.helpers import invoke, post_events
    from tests.functional.stream_fixtures import stored_event_records

    events = [
        {"counter": "jobs", "dimensions": {"provider": "p2", "region": "eu"}, "values": {"amount": 12.5}},
        {"counter": "jobs", "dimensions": {"provider": "p3", "region": "eu"}, "values": {"amount": 0.1}},
        {"counter": "jobs", "dimensions": {"provider": "p2", "region": "us"}, "values": {"amount": 0.2}},
        {"counter": "jobs", "dimensions": {"provider": "a:b:c"}},
        {"counter": "jobs"},
    ]
    post_events(client, events)
    invoke(client, "on_event_records", lambda_event(stored_event_records(aws.dynamodb)))
    whole = client.http.get("/counters/jobs").json_body
    assert (whole["count"], whole["sums"]) == (5, {"amount": 12.8})
    eu = client.http.get("/counters/jobs?where=region:eu").json_body
    assert (eu["count"], eu["sums"], eu["where"]) == (2, {"amount": 12.6}, {"region": "eu"})
    both = client.http.get("/counters/jobs?where=region:eu&where=provider:p2").json_body
    assert (both["count"], both["sums"]) == (1, {"amount": 12.5})
    colons = client.http.get("/counters/jobs?where=provider:a:b:c").json_body
    assert colons["count"] == 1 and colons["sums"] == {}
    histogram = client.http.get("/counters/jobs/histogram?window=2h&where=provider:p2").json_body
    assert sum(b["count"] for b in histogram["buckets"]) == 2
    assert [b["sums"] for b in histogram["buckets"] if b["count"]] == [{"amount": 12.7}]
    answer = client.http.get("/counters/jobs/breakdown?by=provider&limit=1").json_body
    assert answer["values"] == [{"value": "p2", "count": 2, "sums": {"amount": 12.7}, "sums_exact": {"amount": "12.7"}}]
    assert answer["others"] == {"values": 2, "count": 3} and answer["exact"] is True
    assert set(answer) == {"counter", "by", "start", "end", "complete", "keys_read", "exact", "values", "others"}
    filtered = client.http.get("/counters/jobs/breakdown?by=provider&where=region:eu").json_body
    assert [(v["value"], v["count"]) for v in filtered["values"]] == [("p2", 1), ("p3", 1)]
    assert filtered["others"] == {"values": 0, "count": 0}
    for bad in (
        "by=",
        "by=a:b",
        "by=provider&limit=0",
        "by=provider&limit=1001",
        "by=provider&where=nocolon",
        "by=provider&where=region:eu&where=tier:a",  # three dimensions: no filter counter holds them
    ):
        response = client.http.get(f"/counters/jobs/breakdown?{bad}")
        assert response.status_code == 400, bad
        assert set(response.json_body) == {"Code", "Message"}
    assert client.http.get("/counters/jobs?where=a:1&where=a:2").status_code == 400
    assert (whole["sums_exact"], eu["sums_exact"]) == ({"amount": "12.8"}, {"amount": "12.6"})
    assert [b["sums_exact"] for b in histogram["buckets"] if b["count"]] == [{"amount": "12.7"}]
    # Filters are counted for single dimensions and pairs: three clauses are refused, not guessed.
    three = client.http.get("/counters/jobs?where=region:eu&where=provider:p2&where=tier:a")
    assert three.status_code == 400 and "pairs" in three.json_body["Message"]


def test_given_sums_beyond_a_doubles_digits_when_read_over_http_then_sums_exact_keeps_every_digit(
    client: Any, aws: Any, clock: Any
) -> None:
    from tests.functional.helpers import invoke
    from tests.functional.stream_fixtures import stored_event_records

    body = '{"events": [{"counter": "big", "values": {"amount": 12345678901234567.89}},'
    body += ' {"counter": "big", "values": {"amount": 0.01}}]}'
    posted = client.http.post("/events", headers={"Content-Type": "application/json"}, body=body)
    assert posted.status_code == 201, posted.body
    invoke(client, "on_event_records", lambda_event(stored_event_records(aws.dynamodb)))
    answer = client.http.get("/counters/big").json_body
    assert answer["sums_exact"] == {"amount": "12345678901234567.9"}
    assert answer["sums"]["amount"] != Decimal("12345678901234567.9")  # as a double: digits lost


def test_given_filter_pairs_declared_when_events_counted_then_only_those_pairs_have_counters(aws: Any) -> None:
    declared = Settings(filter_pairs=("provider+region",))
    images = [
        image("q#0", "paired", NOW - i * MINUTE, {"provider": f"p{i % 2}", "region": "eu", "tier": "t"}, {})
        for i in range(6)
    ]
    stream.apply_stream_batch(
        aws.dynamodb, declared, from_lambda_event(lambda_event([record(i) for i in images], "shard-0")), NOW
    )
    first, last = NOW // MINUTE - 10, NOW // MINUTE
    filters = {
        item["pk"]["S"]
        for item in aws.dynamodb.scan(TableName=declared.counts_table)["Items"]
        if item["pk"]["S"].startswith("FLT#paired#")
    }
    assert len(filters) == 2 + 1 + 1 + 2  # provider p0/p1, region, tier, and the declared pair per provider
    pair = reads.count_window(
        aws.dynamodb, declared, "paired", first, last, NOW, where={"provider": "p1", "region": "eu"}
    )
    assert pair.count == 3
    for where in ({"provider": "p1", "tier": "t"}, {"region": "eu", "tier": "t"}):
        with pytest.raises(ValidationError, match="FILTER_PAIRS"):
            reads.count_window(aws.dynamodb, declared, "paired", first, last, NOW, where=where)
    with pytest.raises(ValidationError, match="FILTER_PAIRS"):
        breakdowns.breakdown(aws.dynamodb, declared, "paired", "provider", first, last, 5, {"tier": "t"}, NOW)
    by_region = breakdowns.breakdown(
        aws.dynamodb, declared, "paired", "provider", first, last, 5, {"region": "eu"}, NOW
    )
    assert [(v["value"], v["count"]) for v in by_region["values"]] == [("p0", 3), ("p1", 3)]


def test_given_a_split_summary_whose_part_0_expired_when_a_new_single_one_outgrows_then_the_split_keeps_the_rest(
    aws: Any, monkeypatch: Any
) -> None:
    """Each item of the split layout lives by its own events' longest retention, so the bucket's
    other items can outlive part 0. A single part 0 written after it expired and grown past its
    size must merge them into its split, not fail on them."""
    monkeypatch.setattr(summary_writes, "SINGLE_BYTES", 120)
    counter = f"outlived{next(_names)}"
    t = NOW - 5 * MINUTE
    first = [image("q#0", counter, t, {"provider": f"a{i}"}, {}) for i in range(12)]
    apply(aws.dynamodb, [record(i) for i in first], "shard-0")

    def summary_items() -> dict[tuple[str, str], dict[str, Any]]:
        return {
            (i["pk"]["S"], i["sk"]["S"]): i
            for i in aws.dynamodb.scan(TableName=SETTINGS.counts_table)["Items"]
            if i["pk"]["S"] == f"TOP#{counter}#provider"
        }

    heads = [k for k, i in summary_items().items() if k[1][0] in "hd" and k[1].endswith("#0")]
    assert heads and all(summary_items()[k][layout.LAYOUT]["S"] == "parts" for k in heads)
    for pk, sk in heads:  # as TTL deletes an expired part 0
        aws.dynamodb.delete_item(TableName=SETTINGS.counts_table, Key={"pk": {"S": pk}, "sk": {"S": sk}})
    left = {k: topk.decode(i["e"]["S"]).entries for k, i in summary_items().items()}
    assert any(left.values())

    second = [image("q#0", counter, t, {"provider": f"b{i}"}, {}) for i in range(12)]
    apply(aws.dynamodb, [record(i) for i in second], "shard-0")

    after = summary_items()
    assert all(after[k][layout.LAYOUT]["S"] == "parts" for k in heads)
    for key, entries in left.items():
        kept = topk.decode(after[key]["e"]["S"]).entries
        assert {e: c.count for e, c in entries.items()}.items() <= {e: c.count for e, c in kept.items()}.items()
    answer = breakdowns.breakdown(aws.dynamodb, SETTINGS, counter, "provider", t // MINUTE, t // MINUTE, 50, {}, NOW)
    listed = {v["value"]: v["count"] for v in answer["values"]}
    assert all(listed.get(f"b{i}") == 1 for i in range(12))
