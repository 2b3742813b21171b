"""Unique counts through the routes, the SQS handler and moto: delivery, poison, races."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import replace
from hashlib import sha1
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgpack import packb

from chalicelib.core import keyspace, queues, window_params
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.uniques import api as uniques_api
from chalicelib.uniques import batches as uniques_batches
from chalicelib.uniques import layout as uniques_keys
from chalicelib.uniques import sketches
from tests.conftest import ITEM_KEY
from tests.fakes import checking
from tests.functional.helpers import invoke, partition

SETTINGS = Settings()
P = sketches.precision_for(SETTINGS.uniques_error_rate)
KEY = ITEM_KEY.encode()


def post(client: Any, name: str, body: Any) -> Any:
    return client.http.post(f"/hyperloglog/{name}", headers={"Content-Type": "application/json"}, body=json.dumps(body))


def get(client: Any, path: str) -> Any:
    return client.http.get(path)


def queue_url(aws: Any) -> str:
    return aws.sqs.get_queue_url(QueueName=SETTINGS.uniques_queue)["QueueUrl"]


def receive_all(aws: Any) -> list[dict[str, Any]]:
    """Every queued message as a Lambda SQS record (deleted from the queue, as after success)."""
    records = []
    while True:
        messages = aws.sqs.receive_message(QueueUrl=queue_url(aws), MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return records
        for m in messages:
            records.append(
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "eventSource": "aws:sqs",
                }
            )
            aws.sqs.delete_message(QueueUrl=queue_url(aws), ReceiptHandle=m["ReceiptHandle"])


def deliver(client: Any, records: list[dict[str, Any]]) -> dict[str, Any]:
    return invoke(client, "on_unique_items", {"Records": records})


def record(message_id: str, body: str) -> dict[str, Any]:
    return {"messageId": message_id, "receiptHandle": f"rh-{message_id}", "body": body, "eventSource": "aws:sqs"}


def body(name: str, data: list[str], time_ms: int = 1_795_000_000_000) -> str:
    return uniques_batches.message_body(name, sketches.item_hashes(KEY, data), time_ms)


def items(prefix: str, start: int, stop: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(start, stop)]


def sketch_items(aws: Any, name: str) -> list[dict[str, Any]]:
    return partition(aws.dynamodb, f"{keyspace.SKETCH}{name}")


def window_items(aws: Any, name: str) -> list[dict[str, Any]]:
    return partition(aws.dynamodb, f"{keyspace.SKETCH_WINDOW}{name}")


def expected(*item_lists: list[str]) -> int:
    return sketches.estimate(sketches.from_hashes(P, sketches.item_hashes(KEY, (i for g in item_lists for i in g))))


# -- routes ---------------------------------------------------------------------------------


def test_given_items_when_posted_then_202_one_message_and_counted_after_delivery(
    client: Any, aws: Any, clock: Any
) -> None:
    first, second = items("v", 0, 500), items("v", 300, 800)
    assert post(client, "visitors", {"data": first}).json_body == {"accepted": 500}
    response = post(client, "visitors", {"data": "v-1000"})
    assert response.status_code == 202 and response.json_body == {"accepted": 1}
    post(client, "visitors", {"data": second})
    records = receive_all(aws)
    assert len(records) == 3
    result = deliver(client, records)
    # one all-time shard, one day, one hour and one quarter-hour sketch
    assert result["items"] == 1001 and result["writes"] == 4 and result["quarantined"] == 0
    body = get(client, "/hyperloglog/visitors").json_body
    assert body["name"] == "visitors"
    assert body["cardinality"] == expected(first, second, ["v-1000"])
    assert abs(body["cardinality"] - 801) <= 3 * sketches.standard_error(P) * 801
    assert body["error_rate"] == pytest.approx(sketches.standard_error(P), rel=1e-3)


def test_given_known_items_when_counted_then_the_stored_hashes_are_keyed_not_the_items_bare_hashes(
    client: Any, aws: Any, clock: Any
) -> None:
    emails = [f"user-{i}@example.com" for i in range(40)]
    assert post(client, "emails", {"data": emails}).status_code == 202
    deliver(client, receive_all(aws))
    stored = [uniques_batches.decode_item(item) for item in sketch_items(aws, "emails") + window_items(aws, "emails")]
    exact = {int(value) for sketch in stored for value in (sketch.exact if sketch.exact is not None else [])}
    assert len(stored) == 4 and all(sketches.is_exact(s) for s in stored)  # all time, day, hour, quarter
    # What one who reads the table could compute from guessed items, without the key.
    bare = {int(v) for v in sketches.hash_values(b"".join(sha1(packb(e)).digest()[:8] for e in emails))}
    assert not exact & bare
    other_key = {int(v) for v in sketches.hash_values(sketches.item_hashes(b"a guessed key " * 4, emails))}
    assert not exact & other_key
    assert exact == {int(v) for v in sketches.hash_values(sketches.item_hashes(KEY, emails))}


@pytest.mark.parametrize("secret", [None, "short key"])
def test_given_no_usable_item_key_when_items_posted_then_503_and_nothing_queued(
    client: Any, aws: Any, secret: str | None
) -> None:
    name = SETTINGS.item_key_secret
    if secret is None:
        aws.secretsmanager.delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
    else:
        aws.secretsmanager.put_secret_value(SecretId=name, SecretString=secret)
    response = post(client, "visitors", {"data": ["a", "b"]})
    assert response.status_code == 503 and set(response.json_body) == {"Code", "Message"}
    assert receive_all(aws) == []


def test_given_unknown_name_when_read_then_zero(client: Any, aws: Any) -> None:
    response = get(client, "/hyperloglog/nobody")
    assert response.status_code == 200
    assert response.json_body["cardinality"] == 0


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"data": ""},
        {"data": []},
        {"data": ["ok", ""]},
        {"data": ["x" * 1025]},
        {"data": ["ok"] * 501},
        {"data": [1]},
        {"data": 7},
        {"data": "ok", "extra": 1},
        {"data": "ok", "time": "soon"},
        {"data": "ok", "time": 1_795_000_000},  # seconds, not milliseconds
        {"data": "ok", "time": "2026-11-18T10:00:00"},  # no zone
        {"data": "ok", "time": True},
        ["ok"],
    ],
)
def test_given_bad_body_when_posted_then_400_and_nothing_queued(client: Any, aws: Any, body: Any) -> None:
    response = post(client, "visitors", body)
    assert response.status_code == 400
    assert set(response.json_body) == {"Code", "Message"}
    assert receive_all(aws) == []


def test_given_a_time_past_the_allowed_skew_when_posted_then_400_nothing_queued_and_at_the_skew_accepted(
    client: Any, aws: Any, clock: Any
) -> None:
    # Both routes (`/beacon/hyperloglog/{name}` too) are one handler.
    skew_ms = SETTINGS.max_future_skew_seconds * 1000
    for ahead in (clock.now + skew_ms + 1000, uniques_api.times.iso(clock.now + 3_600_000), 4_102_444_799_999):
        response = post(client, "visitors", {"data": "v", "time": ahead})
        assert response.status_code == 400, (ahead, response.body)
        assert (
            "in the future" in response.json_body["Message"]
            and "MAX_FUTURE_SKEW_SECONDS" in response.json_body["Message"]
        )
    assert receive_all(aws) == []
    assert post(client, "visitors", {"data": "v", "time": clock.now + skew_ms}).status_code == 202
    assert len(receive_all(aws)) == 1


def test_given_bad_name_or_json_when_posted_then_400(client: Any, aws: Any) -> None:
    assert post(client, "bad%20name", {"data": "x"}).status_code == 400
    assert post(client, "x" * 201, {"data": "x"}).status_code == 400
    raw = client.http.post("/hyperloglog/ok", headers={"Content-Type": "application/json"}, body="{nope")
    assert raw.status_code == 400
    assert get(client, "/hyperloglog/bad%20name").status_code == 400
    assert receive_all(aws) == []


def test_given_longest_request_when_posted_then_one_message_well_under_the_sqs_limit(client: Any, aws: Any) -> None:
    data = [f"{i:04d}" + "\u00e9" * 1020 for i in range(500)]
    assert post(client, "big", {"data": data}).status_code == 202
    (message,) = receive_all(aws)
    assert len(message["body"].encode()) < 16 * 1024
    assert uniques_batches.parse_message(message["body"]) == ("big", sketches.item_hashes(KEY, data))


def test_given_two_names_when_union_read_then_overlap_counted_once(client: Any, aws: Any, clock: Any) -> None:
    a, b = items("u", 0, 400), items("u", 200, 700)
    post(client, "a", {"data": a})
    post(client, "b", {"data": b})
    deliver(client, receive_all(aws))
    body = get(client, "/hyperloglog?names=a,b,a,missing").json_body
    assert body["names"] == ["a", "b", "missing"]
    assert body["cardinality"] == expected(a, b)
    assert get(client, "/hyperloglog?names=").status_code == 400
    assert get(client, "/hyperloglog?names=a,bad%20one").status_code == 400


# -- the handler: redelivery, death half-way, poison ------------------------------------------


def test_given_batch_when_delivered_twice_then_same_sketch_and_second_writes_nothing(
    client: Any, aws: Any, clock: Any
) -> None:
    post(client, "a", {"data": items("r", 0, 300)})
    post(client, "b", {"data": items("r", 0, 50)})
    records = receive_all(aws)
    deliver(client, records)
    before = {n: sketch_items(aws, n) for n in ("a", "b")}
    again = deliver(client, records)
    assert again["writes"] == 0 and again["unchanged"] == 8
    assert {n: sketch_items(aws, n) for n in ("a", "b")} == before
    assert get(client, "/hyperloglog/a").json_body["cardinality"] == expected(items("r", 0, 300))


class Died(BaseException):
    """The function was stopped here (a timeout or a crash): nothing in the handler catches it."""


def dies_after(allowed: int) -> Callable[[dict[str, Any]], None]:
    """A put check that lets `allowed` puts through, dies once, then lets every put through."""
    left = [allowed]

    def check(_: dict[str, Any]) -> None:
        left[0] -= 1
        if left[0] == -1:
            raise Died("the function died here")

    return check


def test_given_handler_dies_half_way_when_batch_redelivered_then_as_if_applied_once(
    client: Any, aws: Any, app_module: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = {"a": items("d", 0, 200), "b": items("d", 100, 400), "c": items("d", 0, 10)}
    for name, data in groups.items():
        post(client, name, {"data": data})
    records = receive_all(aws)
    monkeypatch.setattr(app_module.aws, "dynamodb", checking(aws.dynamodb, "put_item", dies_after(4)))
    with pytest.raises(Died):
        deliver(client, records)  # wrote a's day, hour, quarter and all-time sketches, then died
    assert len(window_items(aws, "a")) == 3 and sketch_items(aws, "a")
    assert not window_items(aws, "b") and not sketch_items(aws, "b")
    monkeypatch.setattr(app_module.aws, "dynamodb", checking(aws.dynamodb, "put_item", lambda _: None))
    deliver(client, records)
    deliver(client, records)
    for name, data in groups.items():
        assert get(client, f"/hyperloglog/{name}").json_body["cardinality"] == expected(data)
        assert int(sketch_items(aws, name)[0]["ver"]["N"]) == 1


def test_given_a_batch_over_several_hours_when_applied_then_each_name_all_time_sketch_is_written_last(
    client: Any, aws: Any, app_module: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that sees a batch in a name's all-time count (what clients poll) can read the
    batch's hour and day sketches of that name too."""
    for name in ("b", "a"):
        for hours_ago in (30, 2, 0):
            post_at(client, name, items(name, hours_ago, hours_ago + 5), clock.now - hours_ago * HOUR_MS)
    puts: list[str] = []
    monkeypatch.setattr(
        app_module.aws, "dynamodb", checking(aws.dynamodb, "put_item", lambda kw: puts.append(kw["Item"]["pk"]["S"]))
    )
    deliver(client, receive_all(aws))
    for name in ("a", "b"):
        mine = [i for i, pk in enumerate(puts) if pk.endswith(f"#{name}")]
        windows = [i for i in mine if puts[i] == f"HLW#{name}"]
        assert len(windows) == 8  # two days, three hours and their three quarters
        assert [puts[i] for i in mine][-1] == f"HLL#{name}" and max(windows) < mine[-1]


def test_given_corrupt_stored_sketch_when_read_or_written_then_503_and_clear_error(
    client: Any, aws: Any, clock: Any
) -> None:
    aws.dynamodb.put_item(
        TableName=SETTINGS.counts_table,
        Item={
            **uniques_keys.shard_key("broken", 0),
            "sketch": {"B": b"\x80\x02cos\nsystem\n"},
            "ver": {"N": "1"},
        },
    )
    response = get(client, "/hyperloglog/broken")
    assert response.status_code == 503
    assert "unreadable" in response.json_body["Message"]
    with pytest.raises(StorageError):
        uniques_batches.merge_into(
            aws.dynamodb, SETTINGS, uniques_keys.shard_key("broken", 0), sketches.item_hash(KEY, "x"), clock.now, None
        )


# -- shards and concurrent writers --------------------------------------------------------------


def test_given_items_spread_over_shards_and_precisions_when_read_then_one_query_merges_them(
    aws: Any, clock: Any
) -> None:
    groups = [items("s", 0, 3000), items("s", 2000, 5000), items("s", 4000, 6000)]
    for shard, group in enumerate(groups):
        key = uniques_keys.shard_key("spread", shard)
        uniques_batches.merge_into(aws.dynamodb, SETTINGS, key, sketches.item_hashes(KEY, group), clock.now, None)
    coarse = replace(SETTINGS, uniques_error_rate=0.02)  # a shard made under an older setting
    key = uniques_keys.shard_key("spread", 3)
    uniques_batches.merge_into(aws.dynamodb, coarse, key, sketches.item_hash(KEY, "s-7000"), clock.now, None)
    assert len(sketch_items(aws, "spread")) == 4
    answer = uniques_api.cardinality(aws.dynamodb, SETTINGS, ["spread"])
    low = sketches.precision_for(0.02)
    hashes = sketches.item_hashes(KEY, items("s", 0, 6000) + ["s-7000"])
    assert answer["cardinality"] == sketches.estimate(sketches.from_hashes(low, hashes))
    assert answer["error_rate"] == pytest.approx(sketches.standard_error(low), rel=1e-3)


class ReadThenWait:
    """Every thread's first read returns before any thread writes: each write races the others.

    DynamoDB applies a conditional put atomically; moto checks and stores without a lock, so
    each request is serialised here to give it DynamoDB's per-request atomicity. Nothing holds
    the lock between a read and the write that follows it: that race is the one under test.
    """

    def __init__(self, real: Any, barrier: threading.Barrier) -> None:
        self.real = real
        self.barrier = barrier
        self.local = threading.local()
        self.request = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def get_item(self, **kwargs: Any) -> Any:
        with self.request:
            answer = self.real.get_item(**kwargs)
        if not getattr(self.local, "waited", False):
            self.local.waited = True
            self.barrier.wait(timeout=30)
        return answer

    def put_item(self, **kwargs: Any) -> Any:
        with self.request:
            return self.real.put_item(**kwargs)


def test_given_8_writers_on_one_sketch_at_once_when_done_then_sketch_is_merge_of_all(aws: Any, clock: Any) -> None:
    one_shard = replace(SETTINGS, uniques_shards=1)
    sets = [items(f"t{n}", 0, 2000) for n in range(8)]
    dynamodb = ReadThenWait(aws.dynamodb, threading.Barrier(8))
    results: list[Any] = [None] * 8
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            batch = [record(f"m{n}-{k}", body("raced", sets[n][k : k + 500])) for k in range(0, len(sets[n]), 500)]
            messages = queues.from_lambda_event({"Records": batch})
            results[n] = uniques_batches.apply_messages(dynamodb, one_shard, messages, clock.now, sleep=lambda s: None)
        except BaseException as exc:  # surfaced in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert not any(r.quarantined for r in results)
    # each writer writes the all-time sketch, the day, the hour and the quarter: all raced by all eight
    assert sum(r.details["writes"] for r in results) == 32
    assert sum(r.retries for r in results) >= 4 * 7
    everything = sketches.from_hashes(P, sketches.item_hashes(KEY, (i for s in sets for i in s)))
    stored = sketch_items(aws, "raced") + window_items(aws, "raced")
    assert len(stored) == 4
    for item in stored:
        assert sketches.decode(bytes(item["sketch"]["B"])) == everything
        assert int(item["ver"]["N"]) == 8


# -- windows, histograms and the names listing ------------------------------------------------

HOUR_MS = 3_600_000


def post_at(client: Any, name: str, data: list[str], at_ms: int) -> None:
    for k in range(0, len(data), 500):
        response = post(client, name, {"data": data[k : k + 500], "time": at_ms})
        assert response.status_code == 202, response.json_body


def inside(stream: list[tuple[list[str], int]], answer: dict[str, Any]) -> list[str]:
    start, end = (uniques_api.times.parse(answer[k]) for k in ("start", "end"))
    return [i for group, t in stream for i in group if start <= t < end]


def test_given_backdated_items_when_windows_read_then_each_equals_one_sketch_of_its_hours_and_days(
    client: Any, aws: Any, clock: Any
) -> None:
    now = clock.now
    stream = [
        (items("w", 0, 40), now - 10 * 60_000),  # this hour
        (items("w", 30, 90), now - 5 * HOUR_MS),
        (items("w", 80, 700), now - 30 * HOUR_MS),
        (items("w", 600, 2600), now - 3 * 86_400_000),
        (items("w", 0, 3000), now - 20 * 86_400_000),
        (items("w", 5000, 5010), now - 45 * 86_400_000),
    ]
    for group, t in stream:
        post_at(client, "site", group, t)
    post(client, "site", {"data": "w-now"})  # no time: now
    stream.append((["w-now"], now))
    result = deliver(client, receive_all(aws))
    assert result["quarantined"] == 0 and result["names"] == 1
    for window, most_keys in (("1m", 1), ("1h", 1), ("6h", 6), ("24h", 24), ("7d", 76), ("30d", 76)):
        answer = get(client, f"/hyperloglog/site?window={window}").json_body
        assert answer["keys_read"] <= most_keys and answer["complete"] is True
        want = expected(inside(stream, answer))
        assert answer["cardinality"] == want, window
        assert answer["lower"] <= want <= answer["upper"]
        assert uniques_api.times.parse(answer["end"]) == (now // HOUR_MS + 1) * HOUR_MS
    small = get(client, "/hyperloglog/site?window=2h").json_body  # this hour and the one before
    assert small["exact"] is True and small["cardinality"] == 41 and small["error_rate"] == 0.0
    assert small["lower"] == small["upper"] == 41
    explicit = get(
        client,
        f"/hyperloglog/site?start={uniques_api.times.iso(now - 31 * HOUR_MS)}"
        f"&end={uniques_api.times.iso(now - 29 * HOUR_MS)}",
    ).json_body
    assert (
        explicit["cardinality"] == expected(items("w", 80, 700)) and explicit["exact"] is False
    )  # w-80..w-699, all in one hour
    all_time = get(client, "/hyperloglog/site").json_body
    assert all_time["cardinality"] == expected(*(g for g, _ in stream)) and all_time["start"] is None


def test_given_time_passes_when_windows_read_then_expired_sketches_are_ignored(
    client: Any, aws: Any, clock: Any, app_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hour (and quarter) sketches kept 48 hours, day sketches 400 days, as a stage may set them.
    short = replace(app_module.settings, uniques_hour_retention_seconds=48 * 3600)
    monkeypatch.setattr(app_module, "settings", short)
    now = clock.now
    post_at(client, "late", items("x", 0, 30), now - 2 * HOUR_MS)
    post_at(client, "late", items("x", 100, 150), now)
    deliver(client, receive_all(aws))
    assert get(client, "/hyperloglog/late?window=3h").json_body["cardinality"] == 80
    clock.advance(3 * 86_400_000)  # every hour sketch above has expired, the day sketches have not
    answer = get(client, "/hyperloglog/late?window=4d").json_body
    assert "counted whole" in answer["message"]  # the 4-day window's first day, its hours gone
    assert answer["complete"] is True and answer["cardinality"] == expected(
        inside([(items("x", 0, 30), now - 2 * HOUR_MS), (items("x", 100, 150), now)], answer)
    )
    assert get(client, "/hyperloglog/late?window=3h").json_body["cardinality"] == 0
    stale = get(client, "/hyperloglog/late/histogram?resolution=hour&window=4d").json_body
    assert stale["complete"] is False and sum(b["cardinality"] for b in stale["buckets"]) == 0
    clock.advance(400 * 86_400_000)
    since, until = uniques_api.times.iso(now - 3 * HOUR_MS), uniques_api.times.iso(now)
    gone = get(client, f"/hyperloglog/late?start={since}&end={until}").json_body
    assert gone["cardinality"] == 0 and gone["complete"] is False and "retained_from" in gone
    assert get(client, "/hyperloglog/late").json_body["cardinality"] == 80  # all time never expires


def test_given_items_on_several_days_when_histogram_read_then_distinct_per_bucket_not_additive(
    client: Any, aws: Any, clock: Any
) -> None:
    day = 86_400_000
    today = clock.now // day * day
    for d in range(3):
        post_at(client, "hist", items("h", d * 10, d * 10 + 20), today - d * day + HOUR_MS)
    deliver(client, receive_all(aws))
    since = uniques_api.times.iso(today - 2 * day)
    answer = get(client, f"/hyperloglog/hist/histogram?resolution=day&start={since}").json_body
    assert answer["additive"] is False and answer["resolution"] == "day"
    assert [b["cardinality"] for b in answer["buckets"]] == [20, 20, 20]
    assert get(client, "/hyperloglog/hist?window=3d").json_body["cardinality"] == 40  # not 60
    hours = get(client, "/hyperloglog/hist/histogram?resolution=hour&window=24h").json_body["buckets"]
    assert len(hours) == 24 and sum(b["cardinality"] for b in hours) == (20 if clock.now - today >= HOUR_MS else 0)
    assert get(client, "/hyperloglog/hist/histogram?resolution=minute").status_code == 400
    assert get(client, "/hyperloglog/hist/histogram?resolution=hour&window=400d").status_code == 400


def test_given_union_over_a_window_when_read_then_one_batch_read_of_both_names(
    client: Any, aws: Any, clock: Any
) -> None:
    post_at(client, "ua", items("u", 0, 500), clock.now - 2 * 86_400_000)
    post_at(client, "ub", items("u", 400, 900), clock.now - HOUR_MS)
    post_at(client, "ub", items("u", 5000, 6000), clock.now - 40 * 86_400_000)
    deliver(client, receive_all(aws))
    answer = get(client, "/hyperloglog?names=ua,ub&window=30d").json_body
    assert answer["names"] == ["ua", "ub"]
    assert answer["cardinality"] == expected(items("u", 0, 900))
    assert answer["keys_read"] <= 2 * 76


@pytest.mark.parametrize(
    "query",
    [
        "window=7x",
        "window=0m",
        "start=yesterday",
        "start=2026-11-18T00:00:00Z&end=2026-11-17T00:00:00Z",
        "window=1d&start=2026-11-18T00:00:00Z",
        "window=401d",
    ],
)
def test_given_bad_window_when_read_then_400(client: Any, aws: Any, clock: Any, query: str) -> None:
    response = get(client, f"/hyperloglog/site?{query}")
    assert response.status_code == 400 and set(response.json_body) == {"Code", "Message"}


def test_given_names_with_items_when_listed_then_pages_in_name_order_with_last_seen(
    client: Any, aws: Any, clock: Any
) -> None:
    assert get(client, "/hyperloglog").json_body == {"names": [], "next": None}
    for n in range(5):
        post(client, f"list.{n}", {"data": "x"})
    deliver(client, receive_all(aws))
    clock.advance(60_000)
    post(client, "list.3", {"data": "y"})
    deliver(client, receive_all(aws))
    seen: list[dict[str, str]] = []
    cursor = None
    pages = 0
    while True:
        page = get(client, "/hyperloglog?limit=2" + (f"&cursor={cursor}" if cursor else "")).json_body
        seen += page["names"]
        pages += 1
        cursor = page["next"]
        if cursor is None:
            break
    assert [s["name"] for s in seen] == [f"list.{n}" for n in range(5)] and pages == 3
    last_seen = {s["name"]: s["last_seen"] for s in seen}
    assert last_seen["list.3"] == uniques_api.times.iso(clock.now)
    assert last_seen["list.0"] == uniques_api.times.iso(clock.now - 60_000)
    for bad in ("cursor=%25%25", "cursor=bm90IGEgbmFtZSE", "limit=0", "limit=1001", "limit=x"):
        assert get(client, f"/hyperloglog?{bad}").status_code == 400, bad


@pytest.mark.parametrize("window", ["window=24h", "window=", "start=2026-11-18T00:00:00Z", "end=1795000000000"])
def test_given_a_window_without_names_when_listed_then_400_not_a_listing_that_ignores_it(
    client: Any, window: str
) -> None:
    response = get(client, f"/hyperloglog?{window}")
    assert response.status_code == 400 and "give names too" in response.json_body["Message"]


# -- poison: one of each kind ------------------------------------------------------------------


def rejects_writes_holding(poison_hash: bytes) -> Callable[[dict[str, Any]], None]:
    """A put check: DynamoDB refuses (ValidationException) any sketch holding one item's hash."""

    def check(request: dict[str, Any]) -> None:
        if poison_hash in bytes(request["Item"].get("sketch", {}).get("B", b"")):
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "rejected"}}, "PutItem")

    return check


def test_given_one_poison_message_of_each_kind_when_delivered_then_good_applied_once_and_each_set_aside_once(
    client: Any, aws: Any, app_module: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    good_a, good_b = items("g", 0, 20), items("g", 20, 25)
    poison = {
        "m-text": json.dumps({"v": 2, "name": "vis\udc00itors", "hashes": "AAAAAAAAAAA=", "time": clock.now}),
        "m-key": json.dumps({"v": 2, "name": "x" * 201, "hashes": "AAAAAAAAAAA=", "time": clock.now}),
        "m-foreign": json.dumps({"Records": [{"eventSource": "aws:s3"}]}),
        "m-json": "not json",
        "m-name": json.dumps({"v": 1, "name": "bad name", "hashes": "AAAAAAAAAAA="}),
        "m-short": json.dumps({"v": 1, "name": "visitors", "hashes": "AAAA"}),  # 3 bytes: not a hash
        "m-version": json.dumps({"v": 9, "name": "visitors"}),
        "m-time": json.dumps({"v": 2, "name": "visitors", "hashes": "AAAAAAAAAAA=", "time": "soon"}),
        "m-rejected": body("visitors", ["storage-says-no"]),
    }
    batch = [
        record("m-1", body("visitors", good_a)),
        *(record(k, v) for k, v in poison.items()),
        record("m-2", body("visitors", good_b, clock.now - HOUR_MS)),
    ]
    monkeypatch.setattr(
        app_module.aws,
        "dynamodb",
        checking(aws.dynamodb, "put_item", rejects_writes_holding(sketches.item_hash(KEY, "storage-says-no"))),
    )
    first = deliver(client, batch)  # returns: Lambda deletes the batch, nothing is redriven
    assert first["quarantined"] == len(poison) and first["counted"] == 2 and first["items"] == 25
    assert get(client, "/hyperloglog/visitors").json_body["cardinality"] == 25
    assert get(client, "/hyperloglog/visitors?window=2h").json_body["cardinality"] == 25
    again = deliver(client, batch)
    assert again["writes"] == 0 and again["quarantined"] == len(poison)
    set_aside = get(client, "/quarantine?source=uniques-queue").json_body["records"]
    assert sorted(r["id"] for r in set_aside) == sorted(poison), "each set aside once, however often delivered"
    assert {r["source"] for r in get(client, "/quarantine").json_body["records"]} == {"uniques-queue"}
    reasons = {r["id"]: r["reason"] for r in set_aside}
    assert "ValidationException" in reasons["m-rejected"]


def test_given_a_lone_surrogate_in_an_item_when_posted_then_400_and_nothing_queued(client: Any, aws: Any) -> None:
    raw = '{"data": ["fine", "a\\ud800"]}'
    response = client.http.post("/hyperloglog/visitors", headers={"Content-Type": "application/json"}, body=raw)
    assert response.status_code == 400 and "data[1]" in response.json_body["Message"]
    assert receive_all(aws) == []


def throttled(_: dict[str, Any]) -> None:
    raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}}, "PutItem")


def test_given_storage_throttles_when_delivered_then_the_batch_fails_and_nothing_is_set_aside(
    client: Any, aws: Any, app_module: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = [record("m-1", body("visitors", items("t", 0, 5))), record("m-2", body("visitors", ["t-9"]))]
    real = aws.dynamodb
    monkeypatch.setattr(app_module.aws, "dynamodb", checking(real, "put_item", throttled))
    with pytest.raises(StorageError):
        deliver(client, batch)
    monkeypatch.setattr(app_module.aws, "dynamodb", real)
    assert get(client, "/quarantine?source=uniques-queue").json_body["records"] == []
    assert deliver(client, batch)["counted"] == 2


# -- property: any batches, redelivered, reordered, dying half-way, lose and inflate nothing ---

_example = [0]


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_given_any_batches_redelivered_reordered_or_dying_half_way_then_every_window_equals_one_sketch_of_its_items(
    aws: Any, clock: Any, data: st.DataObject
) -> None:
    _example[0] += 1
    name = f"prop.{_example[0]}"
    messages = data.draw(
        st.lists(
            st.tuples(st.lists(st.integers(0, 700), min_size=1, max_size=300), st.integers(0, 60)),
            min_size=1,
            max_size=8,
        )
    )
    stream = [([f"i{i}" for i in group], clock.now - hours * HOUR_MS) for group, hours in messages]
    records = [record(f"{name}-{n}", body(name, group, t)) for n, (group, t) in enumerate(stream)]
    cut = sorted(data.draw(st.sets(st.integers(1, max(1, len(records) - 1)), max_size=3)))
    batches = [records[a:b] for a, b in zip([0, *cut], [*cut, len(records)]) if records[a:b]]
    deliveries = data.draw(st.lists(st.sampled_from(range(len(batches))), max_size=6)) + list(range(len(batches)))
    deliveries = data.draw(st.permutations(deliveries))
    for index in deliveries:
        dies_at = data.draw(st.none() | st.integers(0, 4))
        dynamodb = aws.dynamodb if dies_at is None else checking(aws.dynamodb, "put_item", dies_after(dies_at))
        try:
            uniques_batches.apply_messages(
                dynamodb, SETTINGS, queues.from_lambda_event({"Records": batches[index]}), clock.now
            )
        except Died:
            pass
    for index in range(len(batches)):  # every batch is delivered whole at least once in the end
        uniques_batches.apply_messages(
            aws.dynamodb, SETTINGS, queues.from_lambda_event({"Records": batches[index]}), clock.now
        )
    for window in ("1h", "24h", "3d"):
        hours = window_params.hour_range({"window": window}, clock.now)
        answer = uniques_api.window_cardinality(aws.dynamodb, SETTINGS, [name], uniques_api.hour_span(hours), clock.now)
        assert answer["cardinality"] == expected(inside(stream, answer))
    every = [i for group, _ in stream for i in group]
    assert uniques_api.cardinality(aws.dynamodb, SETTINGS, [name])["cardinality"] == expected(every)


def test_given_a_fault_in_the_code_on_a_storage_call_when_delivered_then_the_batch_fails_and_nothing_is_set_aside(
    client: Any, aws: Any, app_module: Any, clock: Any
) -> None:
    batch = [record("m-1", body("visitors", items("k", 0, 5))), record("m-2", body("visitors", ["k-9"]))]

    def fault(**_: Any) -> None:  # not about any message: a bug, a bad deploy
        raise KeyError("sketch")

    events = aws.dynamodb.meta.events
    events.register("before-call.dynamodb.PutItem", fault)
    try:
        with pytest.raises(KeyError):
            deliver(client, batch)
    finally:
        events.unregister("before-call.dynamodb.PutItem", fault)
    assert get(client, "/quarantine?source=uniques-queue").json_body["records"] == []
    again = deliver(client, batch)  # Lambda retries the batch once the fault is gone
    assert again["counted"] == 2 and again["quarantined"] == 0
    assert get(client, "/hyperloglog/visitors").json_body["cardinality"] == 6
