"""Unique counts through the routes, the SQS handler and moto: delivery, poison, races."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

import pytest

from chalicelib.core import queues
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.uniques import api as uniques_api
from chalicelib.uniques import batches as uniques_batches
from chalicelib.uniques import keys as uniques_keys
from chalicelib.uniques import sketch_encoding as sketches

SETTINGS = Settings()
P = sketches.precision_for(SETTINGS.uniques_error_rate)


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
    return client.lambda_.invoke("on_unique_items", {"Records": records}).payload


def record(message_id: str, body: str) -> dict[str, Any]:
    return {"messageId": message_id, "receiptHandle": f"rh-{message_id}", "body": body, "eventSource": "aws:sqs"}


def body(name: str, data: list[str], time_ms: int = 1_795_000_000_000) -> str:
    return uniques_batches.message_body(name, sketches.item_hashes(data), time_ms)


def items(prefix: str, start: int, stop: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(start, stop)]


def sketch_items(aws: Any, name: str) -> list[dict[str, Any]]:
    return aws.dynamodb.query(
        TableName=SETTINGS.counts_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"HLL#{name}"}},
        ConsistentRead=True,
    )["Items"]


def window_items(aws: Any, name: str) -> list[dict[str, Any]]:
    return aws.dynamodb.query(
        TableName=SETTINGS.counts_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"HLW#{name}"}},
        ConsistentRead=True,
    )["Items"]


def expected(*item_lists: list[str]) -> int:
    return sketches.estimate(sketches.from_hashes(P, sketches.item_hashes(i for g in item_lists for i in g)))


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
    # one all-time shard, one hour and one day sketch
    assert result["items"] == 1001 and result["writes"] == 3 and result["quarantined"] == 0
    body = get(client, "/hyperloglog/visitors").json_body
    assert body["name"] == "visitors"
    assert body["cardinality"] == expected(first, second, ["v-1000"])
    assert abs(body["cardinality"] - 801) <= 3 * sketches.standard_error(P) * 801
    assert body["error_rate"] == pytest.approx(sketches.standard_error(P), rel=1e-3)


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
        ["ok"],
    ],
)
def test_given_bad_body_when_posted_then_400_and_nothing_queued(client: Any, aws: Any, body: Any) -> None:
    response = post(client, "visitors", body)
    assert response.status_code == 400
    assert set(response.json_body) == {"Code", "Message"}
    assert receive_all(aws) == []


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
    assert uniques_batches.parse_message(message["body"]) == ("big", sketches.item_hashes(data))


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
    assert again["writes"] == 0 and again["unchanged"] == 6
    assert {n: sketch_items(aws, n) for n in ("a", "b")} == before
    assert get(client, "/hyperloglog/a").json_body["cardinality"] == expected(items("r", 0, 300))


class Died(BaseException):
    """The function was stopped here (a timeout or a crash): nothing in the handler catches it."""


class FailingPuts:
    """A DynamoDB client whose put_item dies once after `allowed` successful puts."""

    def __init__(self, real: Any, allowed: int) -> None:
        self.real = real
        self.allowed = allowed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def put_item(self, **kwargs: Any) -> Any:
        if self.allowed == 0:
            self.allowed = -1
            raise Died("the function died here")
        self.allowed -= 1
        return self.real.put_item(**kwargs)


def test_given_handler_dies_half_way_when_batch_redelivered_then_as_if_applied_once(
    client: Any, aws: Any, app_module: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = {"a": items("d", 0, 200), "b": items("d", 100, 400), "c": items("d", 0, 10)}
    for name, data in groups.items():
        post(client, name, {"data": data})
    records = receive_all(aws)
    monkeypatch.setattr(app_module.aws, "dynamodb", FailingPuts(aws.dynamodb, allowed=1))
    with pytest.raises(Died):
        deliver(client, records)
    assert sketch_items(aws, "a") and not sketch_items(aws, "b")
    monkeypatch.setattr(app_module.aws, "dynamodb", FailingPuts(aws.dynamodb, allowed=10**6))
    deliver(client, records)
    deliver(client, records)
    for name, data in groups.items():
        assert get(client, f"/hyperloglog/{name}").json_body["cardinality"] == expected(data)
        assert int(sketch_items(aws, name)[0]["version"]["N"]) == 1


def test_given_poison_messages_between_good_ones_when_delivered_then_good_counted_and_poison_set_aside(
    client: Any, aws: Any, clock: Any
) -> None:
    good = body("visitors", items("p", 0, 20))
    poison = {
        "m-2": "not json",
        "m-3": json.dumps({"v": 1, "name": "bad name", "hashes": "AAAAAAAAAAA="}),
        "m-4": json.dumps({"v": 1, "name": "visitors", "hashes": "AAAA"}),  # 3 bytes: not a hash
        "m-5": json.dumps({"v": 9, "name": "visitors"}),
    }
    batch = [
        record("m-1", good),
        *(record(k, v) for k, v in poison.items()),
        record("m-6", body("visitors", ["p-100"])),
    ]
    result = deliver(client, batch)
    assert result["quarantined"] == 4 and result["items"] == 21
    assert get(client, "/hyperloglog/visitors").json_body["cardinality"] == expected(items("p", 0, 20), ["p-100"])
    deliver(client, batch)
    set_aside = get(client, "/quarantine?source=uniques-queue").json_body["records"]
    assert sorted(r["id"] for r in set_aside) == sorted(poison)
    assert {r["source"] for r in get(client, "/quarantine").json_body["records"]} == {"uniques-queue"}


def test_given_corrupt_stored_sketch_when_read_or_written_then_503_and_clear_error(
    client: Any, aws: Any, clock: Any
) -> None:
    aws.dynamodb.put_item(
        TableName=SETTINGS.counts_table,
        Item={
            **uniques_keys.shard_key("broken", 0),
            "sketch": {"B": b"\x80\x02cos\nsystem\n"},
            "version": {"N": "1"},
        },
    )
    response = get(client, "/hyperloglog/broken")
    assert response.status_code == 503
    assert "unreadable" in response.json_body["Message"]
    with pytest.raises(StorageError):
        uniques_batches.merge_into_shard(aws.dynamodb, SETTINGS, "broken", 0, sketches.item_hash("x"), clock.now)


# -- shards and concurrent writers --------------------------------------------------------------


def test_given_items_spread_over_shards_and_precisions_when_read_then_one_query_merges_them(
    aws: Any, clock: Any
) -> None:
    groups = [items("s", 0, 3000), items("s", 2000, 5000), items("s", 4000, 6000)]
    for shard, group in enumerate(groups):
        uniques_batches.merge_into_shard(
            aws.dynamodb, SETTINGS, "spread", shard, sketches.item_hashes(group), clock.now
        )
    coarse = replace(SETTINGS, uniques_error_rate=0.02)  # a shard made under an older setting
    uniques_batches.merge_into_shard(aws.dynamodb, coarse, "spread", 3, sketches.item_hash("s-7000"), clock.now)
    assert len(sketch_items(aws, "spread")) == 4
    answer = uniques_api.cardinality(aws.dynamodb, SETTINGS, ["spread"])
    low = sketches.precision_for(0.02)
    hashes = sketches.item_hashes(items("s", 0, 6000) + ["s-7000"])
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
    # each writer writes the all-time sketch, the hour and the day: all three raced by all eight
    assert sum(r.details["writes"] for r in results) == 24
    assert sum(r.retries for r in results) >= 3 * 7
    everything = sketches.from_hashes(P, sketches.item_hashes(i for s in sets for i in s))
    stored = sketch_items(aws, "raced") + window_items(aws, "raced")
    assert len(stored) == 3
    for item in stored:
        assert sketches.decode(bytes(item["sketch"]["B"])) == everything
        assert int(item["version"]["N"]) == 8
