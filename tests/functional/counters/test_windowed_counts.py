"""Windowed counts end to end on moto: POST, stream batches as Lambda delivers them, reads.

Delivery is at least once, so every batch here is also delivered two and three times, in
other shapes, and cut off half-way by an injected failure: the counts must stay exact.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from chalicelib.core import keyspace
from chalicelib.core.settings import Settings
from chalicelib.counters import stream
from tests.fakes import Patched, recording
from tests.functional.helpers import invoke, post_events
from tests.functional.stream_fixtures import batches, lambda_event, record, stored_event_records

MINUTE = 60_000
HOUR = 60 * MINUTE


def deliver(client: Any, records: list[dict[str, Any]]) -> dict[str, Any]:
    return invoke(client, "on_event_records", lambda_event(records))["state"]


def window_count(client: Any, counter: str, query: str) -> dict[str, Any]:
    response = client.http.get(f"/counters/{counter}?{query}")
    assert response.status_code == 200, response.json_body
    return response.json_body


def brute_force(times: list[int], first_ms: int, last_ms: int) -> int:
    return sum(1 for t in times if first_ms // MINUTE <= t // MINUTE <= last_ms // MINUTE)


@pytest.fixture
def spread_events(clock: Any) -> dict[str, list[int]]:
    """~300 events over 30 hours for 3 counters, times at random milliseconds."""
    rng = random.Random(7)
    return {
        f"jobs.provider-{p}": sorted(clock.now - rng.randrange(30 * HOUR) for _ in range(rng.randrange(80, 120)))
        for p in (1, 2, 3)
    }


def as_posts(spread: dict[str, list[int]], with_ids: bool = False) -> list[dict[str, Any]]:
    posts = [{"counter": c, "time": t, "retention": 7 * 86400} for c, times in spread.items() for t in times]
    if with_ids:  # client ids: a marker per event, so a batch spans several transactions
        for i, post in enumerate(posts):
            post["id"] = f"client-{i}"
    return posts


def assert_windows_exact(client: Any, spread: dict[str, list[int]], now: int) -> None:
    for counter, times in spread.items():
        for end in (now, now - 3 * HOUR - 17 * MINUTE, now - 5 * HOUR):
            body = window_count(client, counter, f"window=24h&end={end}")
            assert body["count"] == brute_force(times, end - 1439 * MINUTE, end), (counter, end)
            assert body["keys_read"] <= 27  # 25 buckets and the days of its partial hours
            body = window_count(client, counter, f"window=90m&end={end}")
            assert body["count"] == brute_force(times, end - 89 * MINUTE, end)


def test_given_events_over_30_hours_when_stream_delivered_once_then_every_window_exact(
    client: Any, app_module: Any, aws: Any, clock: Any, spread_events: dict[str, list[int]]
) -> None:
    post_events(client, as_posts(spread_events))
    for batch in batches(stored_event_records(aws.dynamodb), 100):
        deliver(client, batch)
    assert_windows_exact(client, spread_events, clock.now)


@pytest.mark.parametrize("times", [2, 3])
@pytest.mark.parametrize("with_ids", [False, True], ids=["positions", "markers"])
def test_given_every_batch_delivered_again_when_counted_then_exact(
    client: Any,
    app_module: Any,
    aws: Any,
    clock: Any,
    spread_events: dict[str, list[int]],
    times: int,
    with_ids: bool,
) -> None:
    post_events(client, as_posts(spread_events, with_ids))
    records = stored_event_records(aws.dynamodb)
    for batch in batches(records, 100):
        results = [deliver(client, batch) for _ in range(times)]
        # A stream record may carry several events (a pack): every event of it is a duplicate.
        events = results[0]["counted"] + results[0]["duplicates"]
        assert events >= len(batch) and all(r["counted"] == 0 and r["duplicates"] == events for r in results[1:])
    # Redelivery in other shapes: shuffled, overlapping, smaller batches.
    shuffled = records[:]
    random.Random(1).shuffle(shuffled)
    for batch in batches(shuffled, 37):
        deliver(client, batch)
    assert_windows_exact(client, spread_events, clock.now)


def test_given_client_retries_post_with_same_id_when_counted_then_once(
    client: Any, app_module: Any, aws: Any, clock: Any
) -> None:
    event = {"counter": "retry", "id": "order-17", "time": clock.now - 5 * MINUTE}
    post_events(client, [event])
    post_events(client, [event, event])
    records = stored_event_records(aws.dynamodb)
    assert len(records) == 2, "the second POST's two events travel in one stream record"
    deliver(client, records[:1])
    deliver(client, records[1:])
    assert window_count(client, "retry", "window=1h")["count"] == 1


def test_given_modify_and_remove_records_when_delivered_then_ignored(
    client: Any, app_module: Any, aws: Any, clock: Any
) -> None:
    post_events(client, [{"counter": "ttl", "time": clock.now}])
    (insert,) = stored_event_records(aws.dynamodb)
    image = insert["dynamodb"]["NewImage"]
    result = deliver(client, [record(image, "MODIFY"), record(image, "REMOVE"), insert])
    assert result["skipped"] == 2 and result["counted"] == 1
    assert window_count(client, "ttl", "window=5m")["count"] == 1


def test_given_buckets_past_retention_when_read_then_ignored_and_window_flagged(
    client: Any, app_module: Any, aws: Any, clock: Any
) -> None:
    post_events(client, [{"counter": "short", "time": clock.now, "retention": 3600}])
    deliver(client, stored_event_records(aws.dynamodb))
    assert window_count(client, "short", "window=1h")["count"] == 1
    clock.advance(2 * HOUR + 2 * MINUTE)  # minute and hour buckets expired, not yet deleted
    body = window_count(client, "short", "window=3h")
    assert body["count"] == 0
    assert body["complete"] is False and "retained_from" in body
    assert window_count(client, "short", "window=30m")["complete"] is True


def test_given_events_when_histogram_read_then_buckets_match_brute_force(
    client: Any, app_module: Any, aws: Any, clock: Any, spread_events: dict[str, list[int]]
) -> None:
    post_events(client, as_posts(spread_events))
    deliver(client, stored_event_records(aws.dynamodb))
    times = spread_events["jobs.provider-2"]
    for resolution, size in (("minute", MINUTE), ("hour", HOUR), ("day", 24 * HOUR)):
        start, end = clock.now - 6 * HOUR, clock.now
        response = client.http.get(
            f"/counters/jobs.provider-2/histogram?start={start}&end={end}&resolution={resolution}"
        )
        assert response.status_code == 200
        buckets = response.json_body["buckets"]
        from chalicelib.core.times import parse as time_ms

        for bucket in buckets:
            b = time_ms(bucket["start"])
            assert bucket["count"] == sum(1 for t in times if b <= t < b + size), (resolution, bucket)
        assert sum(b["count"] for b in buckets) >= brute_force(times, start, end)


def test_given_same_bucket_events_in_batch_when_applied_then_one_update_per_bucket(
    client: Any, aws: Any, clock: Any
) -> None:
    post_events(client, [{"counter": "dense", "time": clock.now} for _ in range(20)])
    updates: list[dict[str, Any]] = []
    transactions: list[dict[str, Any]] = []

    from chalicelib.events.stream_records import from_lambda_event

    puts: list[dict[str, Any]] = []
    recorded = recording(
        recording(recording(aws.dynamodb, "transact_write_items", transactions), "update_item", updates),
        "put_item",
        puts,
    )
    stream.apply_stream_batch(
        recorded, Settings(), from_lambda_event(lambda_event(stored_event_records(aws.dynamodb))), clock.now
    )
    buckets = [u for u in updates if u["Key"]["pk"]["S"].startswith("CTR#")]
    assert len(buckets) == 2  # one hour bucket (with its minute's count inside) and one day bucket
    assert {u["ExpressionAttributeValues"][":n"]["N"] for u in buckets} == {"20"}
    (hour,) = [u for u in buckets if u["Key"]["sk"]["S"].startswith("h#")]
    minute_counts = [v["N"] for k, v in hour["ExpressionAttributeValues"].items() if k.startswith(":m")]
    assert minute_counts == ["20"]
    # Generated ids: the proof is the shard's position on each bucket item, in the same
    # UpdateItem; no transaction, and one audit update for the batch: the stream shard's item of
    # the quarter hour, holding every events partition's numbers (counters/audit_items.py).
    assert transactions == []
    audits = [u for u in updates if u["Key"]["pk"]["S"].startswith(keyspace.AUDIT_GROUP)]
    assert len(audits) == 1
    # GET /counters: the batch logs the counters whose day bucket it created, in one item.
    assert [p["Item"]["pk"]["S"] for p in puts] == ["CATALOG#counters#log"]
    assert len(updates) == len(buckets) + len(audits)


def test_given_unprocessed_keys_when_window_read_then_retried_and_exact(
    client: Any,
    app_module: Any,
    aws: Any,
    clock: Any,
    spread_events: dict[str, list[int]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    post_events(client, as_posts(spread_events))
    deliver(client, stored_event_records(aws.dynamodb))
    calls: list[int] = []
    real = aws.dynamodb

    def holds_back_keys(RequestItems: dict[str, Any]) -> Any:
        """Answers half the keys at first and returns the rest as UnprocessedKeys."""
        ((table, request),) = RequestItems.items()
        calls.append(len(request["Keys"]))
        if len(calls) > 1:
            return real.batch_get_item(RequestItems=RequestItems)
        half = len(request["Keys"]) // 2
        answered = real.batch_get_item(RequestItems={table: {**request, "Keys": request["Keys"][:half]}})
        answered["UnprocessedKeys"] = {table: {**request, "Keys": request["Keys"][half:]}}
        return answered

    monkeypatch.setattr(app_module.aws, "dynamodb", Patched(real, batch_get_item=holds_back_keys), raising=False)
    times = spread_events["jobs.provider-1"]
    end = clock.now - 2 * HOUR - 7 * MINUTE
    body = window_count(client, "jobs.provider-1", f"window=24h&end={end}")
    assert len(calls) == 2 and calls[1] == calls[0] - calls[0] // 2
    assert body["count"] == brute_force(times, end - 1439 * MINUTE, end)


def test_given_a_name_with_a_colon_when_read_percent_encoded_then_the_route_gets_it_decoded(
    client: Any, aws: Any, clock: Any
) -> None:
    """API Gateway's REST API hands Lambda each path parameter percent-decoded: a client that
    encodes `:` as `%3A` (as most HTTP libraries do) reads the same counter as one that does not."""
    post_events(client, [{"counter": "jobs.eu:p1", "time": clock.now}] * 3)
    for batch in batches(stored_event_records(aws.dynamodb), 100):
        deliver(client, batch)
    plain = window_count(client, "jobs.eu:p1", "window=1h")
    encoded = window_count(client, "jobs.eu%3Ap1", "window=1h")
    assert (plain["counter"], plain["count"]) == ("jobs.eu:p1", 3)
    assert (encoded["counter"], encoded["count"]) == ("jobs.eu:p1", 3)
